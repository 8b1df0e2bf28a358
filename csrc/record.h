/* One op call as the recorder stores it, and the storages it read and wrote. Pure C; the layouts are mirrored by
 * roofline/_datamodel/_records.py (RECORD_DTYPE, ACCESS_RAW_DTYPE): change both together. 88 and 24 bytes, no implicit
 * padding. */
#ifndef RL_RECORD_H
#define RL_RECORD_H

#include <stdint.h>

/* Record status values beyond rl_status (cost.h). */
#define RL_E_DESCRIBE 10 /* an argument could not be described (symbolic shape, sparse layout, > RL_MAX_DIMS) */

/* Phases: (code, name). The names are exported as roofline._core.PHASES (index = code); a document stores codes,
 * so a new phase is appended, never inserted. RECOMPUTE: forward ops run again inside a backward (activation
 * checkpointing), hardware work that the model FLOPs (MFU) leave out. */
#define RL_PHASES(X) X(FORWARD, 0, "forward") X(BACKWARD, 1, "backward") X(OPTIMIZER, 2, "optimizer") \
    X(RECOMPUTE, 3, "recompute")
#define RL_PHASE_ENUM_(id, code, name) RL_PHASE_##id = code,
enum { RL_PHASES(RL_PHASE_ENUM_) RL_PHASE_COUNT };
#undef RL_PHASE_ENUM_
#define RL_PHASE_LAST (RL_PHASE_COUNT - 1)

typedef struct {
    uint64_t matrix_flops;  /* true matrix FLOPs */
    uint64_t vector_flops;
    uint64_t special_ops;   /* transcendental / special-function evaluations */
    uint64_t bytes_read;
    uint64_t bytes_written;
    uint64_t flop_counter_flops; /* FlopCounterMode's count for this call (0 if it does not register the op) */
    double t_start;         /* seconds, NaN when not timed */
    double t_end;
    uint32_t op;            /* index into the report's op-name table */
    uint32_t module;        /* index into the report's module-set table */
    uint8_t phase;          /* RL_PHASE_* */
    uint8_t dtype;          /* rl_dtype the op computes in */
    uint8_t status;         /* RL_OK or an error: the counts of this record are then zero */
    uint8_t kind;           /* rl_kind */
    uint32_t seq;           /* call order (wraps after 2^32 calls; ordering within a report uses the row index) */
    uint32_t sig;           /* index into the report's signature table (shapes and dtypes of the tensor inputs) */
    uint32_t reserved;      /* zero */
} rl_record;

/* One storage an op call read (write = 0) or wrote (write = 1); one per (call, storage, direction). */
typedef struct {
    uint64_t storage; /* id of the storage block (its address; may be reused once the storage is freed) */
    uint64_t nbytes;  /* bytes of the storage the call's views cover (saturates at 2^64 - 1) */
    uint32_t record;  /* index of the record (the op call) */
    uint8_t write;
    uint8_t reserved[3];
} rl_access;

#endif
