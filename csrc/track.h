/* Shared declarations of the tracking types of roofline._core (binding layer: includes Python.h): the
 * ModuleTracker (track_tracker.c, its backward attribution in track_link.c), the GradGate (track_gate.c), the
 * Dispatch (track_dispatch.c) and the Block (track_block.c); binding_track.c assembles their method table and types. */
#ifndef RL_TRACK_H
#define RL_TRACK_H

#include "rl_module.h"

#include <stddef.h>
#include <stdint.h>

#include "attribution.h"

/* ---- ModuleTracker (track_tracker.c) ---- */

typedef struct {
    PyObject_HEAD
    PyObject *mode;        /* the dispatch mode that enables the forward hooks (None: always enabled) */
    PyObject *stack_len;   /* torch._C._len_torch_dispatch_stack */
    PyObject *stack_at;    /* torch._C._get_dispatch_stack_at */
    PyObject *flatten;     /* flatten(obj) -> list of pytree leaves */
    PyObject *grad_node;   /* grad_node(tensor) -> its gradient accumulator (a leaf's; grad_fn is read here) */
    PyObject *task_id;     /* torch._C._current_graph_task_id */
    PyObject *will_execute; /* torch._C._will_engine_execute_node */
    PyObject *on_reenter;  /* on_reenter(): a module re-enters in backward (the end-of-backward reset is queued) */
    PyObject *gate_type;   /* GradGate */
    PyObject *hooks;       /* list: the gradient hooks registered, (weakref to dict, id) or a RemovableHandle */
    PyObject *tensor_type; /* torch.Tensor */
    PyObject *param_type;  /* torch.nn.Parameter */
    PyObject *known;       /* dict: module -> name */
    PyObject *seen;        /* set: modules whose children are named */
    PyObject *parents;     /* set of current module names */
    PyObject *ids;         /* dict: sorted tuple of names -> int id */
    PyObject *sets;        /* list: id -> sorted tuple of names */
    PyObject *module_id;   /* int: id of the current set (valid when !dirty) */
    PyObject *steps[2];    /* dicts, [0] leaving and [1] entering a module: set id -> {name: the set id it becomes} */
    PyObject *s_global;    /* "Global" */
    PyObject *s_requires_grad;
    PyObject *s_modules;   /* "_modules" */
    PyObject *s_named_children;
    PyObject *s_grad_fn;
    PyObject *s_register_hook;
    PyObject *s_name; /* "__name__" */
    /* Tensor.register_hook's steps, taken here for plain tensors (all NULL: the method is called): */
    PyObject *hook_dict;    /* the type of a tensor's hook dict (collections.OrderedDict) */
    PyObject *handle_ids;   /* torch.utils.hooks.RemovableHandle: its `next_id` numbers every hook */
    PyObject *has_tf;       /* torch._C._has_torch_function_unary */
    PyObject *s_backward_hooks;
    PyObject *s_register_hook_dict;
    PyObject *s_next_id;
    /* Backward attribution (see `attribute`): all NULL when the tracker was made without `link`. */
    PyObject *seq_nr;       /* torch._C._autograd._get_sequence_nr: the next node's sequence number */
    PyObject *cur_node;     /* torch._C._current_autograd_node */
    PyObject *top_hooks;    /* torch._C._autograd._top_saved_tensors_default_hooks */
    PyObject *recompute_hooks; /* recompute_hooks(hooks) -> whether they are activation checkpointing's recompute */
    PyObject *grad_enabled; /* torch.is_grad_enabled */
    PyObject *note_region;  /* note_region(hooks, set id): a checkpointed function's module starts (NULL: none) */
    PyObject *region_of;    /* region_of(hooks) -> the set id the recomputed function was called in, or None */
    PyObject *s_sequence_nr; /* "_sequence_nr" */
    PyObject *last_node;    /* the node the last backward op ran in (attr caches what it resolved to) */
    PyObject *next_node;    /* the node the op being recorded runs in, when op_task asked it first (env_node's) */
    PyObject *fcm_log;      /* list: row, module id, ...: rows whose module differs from the tracker's set */
    PyObject *unlinked_log; /* list: rows of backward ops linked to no forward module */
    PyObject *fwd_sets;     /* dict: module name -> the module set id its forward last ran in (outside a backward) */
    rl_attribution attr;    /* the attribution state: node intervals, recompute stack (attribution.h) */
    int dirty;
    int enabled;
    int last_backward; /* the last op recorded ran in a backward */
    int reset_queued; /* on_reenter was called and the end-of-backward reset has not run yet */
    Py_ssize_t mode_at; /* where on a thread's mode stack the mode was last found (a guess, tried first) */
} Tracker;

#define RL_MAX_MODULE_SETS ((Py_ssize_t)UINT32_MAX) /* records["module"] is uint32; UINT32_MAX is RL_LINK_NONE */
#define RL_WALK_DEPTH 32                               /* deeper containers are flattened by pytree */

PyObject *rl_tracker_module_id(Tracker *self);       /* the id of the current set of modules (new reference) */
int rl_tracker_check_ready(Tracker *self);            /* 0, or -1 with an exception when not initialised */
PyObject *rl_tracker_set_plus(Tracker *self, uint32_t mid, PyObject *name);
PyObject *rl_tracker_add(Tracker *self, PyObject *name);
PyObject *rl_tracker_discard(Tracker *self, PyObject *name);
PyTypeObject *rl_tracker_type_of(PyObject *module);  /* binding_track.c */
PyObject *rl_gate_type_of(PyTypeObject *tracker_type); /* binding_track.c */

/* ---- backward attribution (track_link.c) ---- */
typedef struct {
    Tracker *self;
    PyObject *name; /* the module whose forward starts or ends (rl_attr_module), else NULL */
} track_ctx;

typedef struct {
    int phase;     /* RL_PHASE_* */
    PyObject *mid; /* new reference: the module id to record */
    PyObject *fcm; /* new reference: the tracker's own module id where it differs from mid, else NULL */
    int unlinked;  /* a backward op whose node no forward module created (credited as the tracker says) */
} attribution;

static inline void attribution_clear(attribution *a) {
    Py_CLEAR(a->mid);
    Py_CLEAR(a->fcm);
}

rl_attr_env rl_track_env(track_ctx *ctx); /* the callbacks through which attribution.c asks torch */
int rl_attr_result(int rc);
int rl_as_mid(PyObject *id, uint32_t *out);
int rl_tracker_mark(Tracker *self);
int rl_tracker_attribute(Tracker *self, long task, attribution *a);
int rl_attribution_log(Tracker *self, const attribution *a, Py_ssize_t row);

/* ---- GradGate (track_gate.c) ---- */
typedef struct {
    PyObject_HEAD
    PyObject *tracker;  /* the Tracker */
    PyObject *name;     /* the module's name */
    PyObject *grad_fns; /* tuple: each hooked tensor's grad_fn, or its gradient accumulator for a leaf */
    PyObject *leaves;   /* bytes: 1 where grad_fns holds a leaf's gradient accumulator */
    PyObject *count;    /* dict: graph task id -> calls so far */
    PyObject *buffer;   /* dict: graph task id -> list of the gradients received so far (None where none yet) */
    Py_ssize_t nb_calls; /* hooked tensors the engine executes in the latest backward to call the gate */
    int reenter;        /* 1: add the module (outputs' gradients); 0: discard it (inputs') */
} GradGate;

extern PyMethodDef rl_gate_arm_def; /* a tensor's gradient hook, bound to (gate, index) */

/* ---- the types' specs and the module functions ---- */
extern PyType_Spec *const rl_gradgate_spec;
extern PyType_Spec *const rl_tracker_spec;
extern PyType_Spec *const rl_dispatch_spec;
extern PyType_Spec *const rl_block_spec;
int rl_block_lock_init(void); /* the process-wide block lock, created once: 0, or -1 with an exception */
PyObject *rl_remove_mode(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *rl_call_alone(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
