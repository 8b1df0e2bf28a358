/* The scalar types of roofline's C core: one enum shared by the cost model (cost.h: the dtype an op computes in,
 * stored in records) and the CPU benchmarks (cpu.h: the element type of an FMA kernel), so any file may include
 * both. Names and item sizes are in cost.c (rl_dtype_name, rl_dtype_itemsize; exported as _core.dtype_table()).
 *
 * Pure C: no Python.h, no other header. */
#ifndef RL_DTYPE_H
#define RL_DTYPE_H

/* Scalar types. Values are stable: they are stored in records and in saved reports. */
typedef enum {
    RL_DT_UNKNOWN = 0,
    RL_DT_FLOAT64,
    RL_DT_FLOAT32,
    RL_DT_FLOAT16,
    RL_DT_BFLOAT16,
    RL_DT_FLOAT8_E4M3FN,
    RL_DT_FLOAT8_E5M2,
    RL_DT_FLOAT8_E4M3FNUZ,
    RL_DT_FLOAT8_E5M2FNUZ,
    RL_DT_COMPLEX128,
    RL_DT_COMPLEX64,
    RL_DT_COMPLEX32,
    RL_DT_INT64,
    RL_DT_INT32,
    RL_DT_INT16,
    RL_DT_INT8,
    RL_DT_UINT8,
    RL_DT_UINT16,
    RL_DT_UINT32,
    RL_DT_UINT64,
    RL_DT_BOOL,
    RL_DT_COUNT
} rl_dtype;

#endif
