/* The one place that configures the NumPy C API for the extension.
 *
 * binding.c defines RL_NUMPY_IMPORT before including this header and imports the API in the module's exec slot;
 * every other translation unit that uses NumPy includes this header without it and shares that import. */
#ifndef RL_NUMPY_H
#define RL_NUMPY_H

#define NPY_NO_DEPRECATED_API NPY_1_23_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL rl_ARRAY_API
#ifndef RL_NUMPY_IMPORT
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#endif
