/* Block: the C __enter__ and __exit__ of a measure block, and the mode-stack functions its steps use. */
#include "track.h"

#ifndef _WIN32
#include <pthread.h>
#endif

/* ---- Block ------------------------------------------------------------------------------------------------ */

/* A measure block is entered and left by Python steps (the subclass's methods below), but its __enter__ and
 * __exit__ are these C functions, so that an asynchronous exception (KeyboardInterrupt from Ctrl-C, SystemExit or
 * any exception a signal handler raises, PyThreadState_SetAsyncExc) can never leave it half entered or half left:
 * CPython raises such an exception only while Python bytecode runs, and between the steps, and between the last
 * step and the return to the with statement, only C runs here.
 *
 * The steps (methods of the subclass):
 *   _prepare()          outside the lock, before anything global is installed (argument state, the clock's sync);
 *   _enter()            under the lock: installs everything, returns what the with statement binds;
 *   _abort()            under the lock, when _enter raised: undoes whatever _enter had done, wherever it stopped;
 *   _closing(et, ev, tb) outside the lock, at exit, the block's modes still in place;
 *   _unwind()           under the lock: removes everything the block installed;
 *   _finish(et, ev, tb) outside the lock, everything removed: builds the result; its return value is __exit__'s;
 *   _misuse(what)       raises the error for __enter__ of a block already entered, __exit__ of one not open;
 *   _refused()          instead of all the above, for a block entered while this thread is inside a step under the
 *                       lock (a signal handler, a finaliser or a callback run in the middle of another block's entry
 *                       or exit): it installs nothing, returns what the with statement binds, and
 *   _finish_refused(et, ev, tb) is its __exit__'s result. The other block's step goes on undisturbed: nothing of its
 *                       half-made state is read or changed, and nothing is raised into it.
 * _abort, _closing and _unwind must be idempotent and finish from any partial state (each undo looks at what is
 * there): an exception raised inside one (an interrupt can land on any line of it) is kept and the step called
 * again, up to BLOCK_TRIES times in all; once the step has completed, the first exception is raised (after _unwind,
 * instead of calling _finish; after _abort, chained to the one that stopped the entry). A step that never completes raises its
 * last exception. Every sub-step of a step runs even when an earlier one raises, so an error of the code itself
 * costs the repeats, not the release.
 *
 * The lock is one process-wide recursive lock: blocks of different threads enter and leave one at a time, so the
 * steps update process-global state (torch's global hook tables, the reference counts of what blocks share)
 * without locks of their own (a Python lock could be left held by an exception landing at its release). A thread
 * waiting for it releases the GIL. The per-op path never takes it. While the interpreter is finalizing, a block
 * waits for it a bounded time, then takes it over from the frozen thread holding it (block_acquire). */

enum { BLOCK_NEW, BLOCK_ENTERING, BLOCK_OPEN, BLOCK_LEAVING, BLOCK_LEFT, BLOCK_FAILED, BLOCK_REFUSED };
#define BLOCK_TRIES 16

typedef struct {
    PyObject_HEAD
    int phase;
} Block;

static PyThread_type_lock block_lock; /* created once, by the first exec of the module */
static unsigned long block_owner;      /* the thread holding it (valid while block_depth > 0) */
static int block_depth;                /* its recursion depth; read and written with the GIL held */
/* 1 while the step under the lock is one of a block whose class sets _nests true (a step loop, whose _enter opens
 * the measure block of its first step): a block entered then nests; 0 inside any other block's step under the lock,
 * where an entry is refused (see _refused). Saved and restored around each step. */
static int block_nests;

static int block_abandoned;            /* a finalizing thread gave up waiting for it: later ones take it at once */

/* Whether the interpreter is shutting down: daemon threads are then frozen when they next take the GIL, and one
 * holding the lock never releases it. */
static int block_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

/* Take the lock (recursively). While the interpreter is finalizing, a lock held by another thread is held by a thread
 * frozen for good (a daemon thread stops when it next takes the GIL, and it needs the GIL to release the lock): it is
 * waited for BLOCK_FINAL_WAIT_US at most, and not at all once such a wait has timed out, then this thread takes the
 * frozen thread's place as the holder (block_release frees the lock). With nothing else left running the steps are
 * safe, and a block entered in the middle of one of them is still refused. */
#define BLOCK_FINAL_WAIT_US 1000000
static void block_acquire(void) {
    unsigned long me = PyThread_get_thread_ident();
    if (block_depth > 0 && block_owner == me) {
        block_depth++;
        return;
    }
    if (!PyThread_acquire_lock(block_lock, NOWAIT_LOCK)) {
        if (!block_finalizing()) {
            Py_BEGIN_ALLOW_THREADS
            PyThread_acquire_lock(block_lock, WAIT_LOCK);
            Py_END_ALLOW_THREADS
        } else if (!block_abandoned) {
            PyLockStatus got;
            Py_BEGIN_ALLOW_THREADS
            got = PyThread_acquire_lock_timed(block_lock, BLOCK_FINAL_WAIT_US, 0);
            Py_END_ALLOW_THREADS
            block_abandoned = got != PY_LOCK_ACQUIRED;
        }
    }
    block_owner = me;
    block_depth = 1;
}

static void block_release(void) {
    if (block_depth > 0 && --block_depth == 0) {
        block_owner = 0;
        PyThread_release_lock(block_lock);
    }
}

#ifndef _WIN32
/* In a child process (a DataLoader worker forked while another thread was entering or leaving a block), only the
 * forking thread exists: a lock held by another thread would never be released. The child starts with a free one
 * (the old one is left allocated: it may be held). */
static void block_after_fork_child(void) {
    PyThread_type_lock fresh = PyThread_allocate_lock();
    if (fresh) {
        block_lock = fresh;
    }
    block_owner = 0;
    block_depth = 0;
}
#endif

/* The exception being raised, as one object (its traceback attached), taken out of the thread state; NULL if none. */
static PyObject *take_exception(void) {
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *et = NULL, *ev = NULL, *tb = NULL;
    PyErr_Fetch(&et, &ev, &tb);
    if (!et) {
        return NULL;
    }
    PyErr_NormalizeException(&et, &ev, &tb);
    if (tb && ev) {
        PyException_SetTraceback(ev, tb);
    }
    Py_XDECREF(et);
    Py_XDECREF(tb);
    return ev;
#endif
}

/* Raise `exc` (stolen). */
static void raise_exception(PyObject *exc) {
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, PyException_GetTraceback(exc));
#endif
}

/* `later` (stolen) with `earlier` (stolen) as its __context__ (either may be NULL): the exception to raise. */
static PyObject *chain_exceptions(PyObject *earlier, PyObject *later) {
    if (!later) {
        return earlier;
    }
    if (earlier && earlier != later) {
        PyException_SetContext(later, earlier); /* steals earlier */
    } else {
        Py_XDECREF(earlier);
    }
    return later;
}

/* self.<name>(*args) (args a tuple, or NULL for none) until it returns normally (at most BLOCK_TRIES calls). The
 * first exception it raised is kept in *pending (a new reference; later ones are dropped). 0 once it has returned,
 * or -1 with its last exception set (*pending, if set, is then its __context__ and NULL). */
static int call_until_done(PyObject *self, const char *name, PyObject *args, PyObject **pending) {
    for (int i = 0;; i++) {
        PyObject *r = NULL, *method = PyObject_GetAttrString(self, name);
        if (method) {
            r = args ? PyObject_Call(method, args, NULL) : PyObject_CallNoArgs(method);
            Py_DECREF(method);
        }
        if (r) {
            Py_DECREF(r);
            return 0;
        }
        PyObject *exc = take_exception();
        if (!exc) {
            PyErr_SetString(PyExc_SystemError, "a block step failed without an exception");
            exc = take_exception();
        }
        if (i + 1 >= BLOCK_TRIES) {
            raise_exception(chain_exceptions(*pending, exc));
            *pending = NULL;
            return -1;
        }
        if (*pending) {
            Py_DECREF(exc);
        } else {
            *pending = exc;
        }
    }
}

static PyObject *block_misuse(Block *self, const char *what) {
    PyObject *r = PyObject_CallMethod((PyObject *)self, "_misuse", "s", what);
    if (r) {
        Py_DECREF(r);
        PyErr_Format(PyExc_RuntimeError, "%s.%s: the block is not in a state for it", Py_TYPE(self)->tp_name, what);
    }
    return NULL;
}

static PyObject *Block_enter(Block *self, PyObject *Py_UNUSED(ignored)) {
    if (self->phase != BLOCK_NEW) {
        return block_misuse(self, "__enter__");
    }
    if (block_depth > 0 && block_owner == PyThread_get_thread_ident() && !block_nests) {
        /* this thread is inside another block's step under the lock: this code runs in the middle of it */
        PyObject *r = PyObject_CallMethod((PyObject *)self, "_refused", NULL);
        self->phase = r ? BLOCK_REFUSED : BLOCK_FAILED;
        return r;
    }
    self->phase = BLOCK_ENTERING;
    PyObject *r = PyObject_CallMethod((PyObject *)self, "_prepare", NULL);
    if (!r) {
        self->phase = BLOCK_FAILED;
        return NULL;
    }
    Py_DECREF(r);
    block_acquire();
    int nests_saved = block_nests;
    PyObject *nests = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "_nests");
    block_nests = nests ? PyObject_IsTrue(nests) == 1 : 0;
    Py_XDECREF(nests);
    PyErr_Clear();
    r = PyObject_CallMethod((PyObject *)self, "_enter", NULL);
    if (r) {
        block_nests = nests_saved;
        self->phase = BLOCK_OPEN;
        block_release();
        return r;
    }
    PyObject *exc = take_exception(), *pending = NULL;
    if (!exc) {
        PyErr_SetString(PyExc_SystemError, "_enter failed without an exception");
        exc = take_exception();
    }
    int rc = call_until_done((PyObject *)self, "_abort", NULL, &pending);
    block_nests = nests_saved;
    self->phase = BLOCK_FAILED;
    block_release();
    /* the exception that stopped the entry, with what interrupted the undo as its successor */
    exc = chain_exceptions(exc, pending);
    raise_exception(rc < 0 ? chain_exceptions(exc, take_exception()) : exc);
    return NULL;
}

static PyObject *Block_exit(Block *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__ takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->phase == BLOCK_REFUSED) {
        self->phase = BLOCK_LEFT;
        return PyObject_CallMethod((PyObject *)self, "_finish_refused", "OOO", args[0], args[1], args[2]);
    }
    if (self->phase != BLOCK_OPEN) {
        return block_misuse(self, "__exit__");
    }
    self->phase = BLOCK_LEAVING;
    PyObject *raised = NULL; /* what __exit__ raises instead of finishing: the last error, earlier ones chained */
    /* _closing is idempotent too, and repeated like the undo steps: an interrupt landing in it before it has closed
     * what the block's exception cut off would leave a mode to be pushed back after the block has exited */
    PyObject *closing_args = PyTuple_Pack(3, args[0], args[1], args[2]);
    if (!closing_args || call_until_done((PyObject *)self, "_closing", closing_args, &raised) < 0) {
        raised = chain_exceptions(raised, take_exception());
    }
    Py_XDECREF(closing_args);
    PyObject *pending = NULL;
    block_acquire();
    int rc = call_until_done((PyObject *)self, "_unwind", NULL, &pending);
    self->phase = BLOCK_LEFT;
    block_release();
    raised = chain_exceptions(raised, pending);
    if (rc < 0) {
        raised = chain_exceptions(raised, take_exception());
    }
    if (raised) {
        raise_exception(raised);
        return NULL;
    }
    return PyObject_CallMethod((PyObject *)self, "_finish", "OOO", args[0], args[1], args[2]);
}

static PyMethodDef Block_methods[] = {
    {"__enter__", (PyCFunction)Block_enter, METH_NOARGS,
     "Run _prepare(), then _enter() under the block lock; if _enter raises, _abort() (repeated while it raises) "
     "before the exception propagates."},
    {"__exit__", (PyCFunction)(void (*)(void))Block_exit, METH_FASTCALL,
     "Run _closing(exc_type, exc, tb), then _unwind() under the block lock (repeated while it raises), then return "
     "_finish(exc_type, exc, tb); an exception raised on the way is raised once everything is unwound, instead of "
     "_finish."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Block_slots[] = {
    {Py_tp_doc, "Block(): base of a context manager entered and left by Python steps that no asynchronous "
                "exception can cut in half (see csrc/track_block.c). Each instance is entered once."},
    {Py_tp_methods, Block_methods},
    {0, NULL},
};

static PyType_Spec Block_spec = {
    .name = "roofline._core.Block",
    .basicsize = sizeof(Block),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = Block_slots,
};
PyType_Spec *const rl_block_spec = &Block_spec;

/* remove_mode(mode, length, at, pop, push, log): take `mode` off one of this thread's mode stacks in one step no
 * asynchronous exception can cut (no Python frame runs, given C callables): length() its size, at(i) its entry i
 * (0 at the bottom), pop() takes the top entry off, push(m) puts m on top (torch's functions for the dispatch or the
 * function mode stack; _pop_torch_dispatch_stack bound to None). The modes above it are popped and pushed back in
 * their order. When the mode was on the stack, the tuple of the modes that were
 * above it (bottom first; () when it was on top) is appended to the list `log` before returning. True when the mode
 * was removed, False when it was not on the stack. */
PyObject *rl_remove_mode(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6 || !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "remove_mode(mode, length, at, pop, push, log): log must be a list");
        return NULL;
    }
    PyObject *mode = args[0], *at = args[2], *pop = args[3], *push = args[4];
    PyObject *n_obj = PyObject_CallNoArgs(args[1]);
    Py_ssize_t n = n_obj ? PyLong_AsSsize_t(n_obj) : -1;
    Py_XDECREF(n_obj);
    if (n == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t i = n - 1;
    for (; i >= 0; i--) { /* the mode is usually on top */
        PyObject *idx = PyLong_FromSsize_t(i);
        PyObject *m = idx ? PyObject_CallOneArg(at, idx) : NULL;
        Py_XDECREF(idx);
        if (!m) {
            return NULL;
        }
        Py_DECREF(m); /* the stack keeps it alive */
        if (m == mode) {
            break;
        }
    }
    if (i < 0) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t k = n - 1 - i; /* modes above it */
    PyObject *above = PyTuple_New(k);
    if (!above) {
        return NULL;
    }
    Py_ssize_t popped = 0; /* above[k - popped:] are off the stack */
    PyObject *m = NULL;
    while (popped <= k) {
        m = PyObject_CallNoArgs(pop);
        if (!m) {
            break;
        }
        if (popped == k) {
            break; /* the mode itself */
        }
        PyTuple_SET_ITEM(above, k - 1 - popped, m);
        popped++;
        m = NULL;
    }
    int ok = m == mode;
    if (m && !ok) {
        PyErr_SetString(PyExc_RuntimeError, "remove_mode: the dispatch mode stack changed while it was read");
        PyObject *exc = take_exception();
        PyObject *r = PyObject_CallOneArg(push, m); /* put back what was popped in its place */
        Py_XDECREF(r);
        PyErr_Clear();
        raise_exception(exc);
    }
    Py_XDECREF(m);
    PyObject *exc = ok ? NULL : take_exception();
    for (Py_ssize_t j = k - popped; j < k; j++) { /* the modes above it, back in their order */
        PyObject *r = PyObject_CallOneArg(push, PyTuple_GET_ITEM(above, j));
        if (!r) {
            exc = chain_exceptions(exc, take_exception());
        }
        Py_XDECREF(r);
    }
    if (ok && PyList_Append(args[5], above) < 0) {
        exc = chain_exceptions(exc, take_exception());
    }
    Py_DECREF(above);
    if (exc) {
        raise_exception(exc);
        return NULL;
    }
    if (!ok) { /* pop failed with nothing set: cannot happen, but never return NULL without an exception */
        PyErr_SetString(PyExc_RuntimeError, "remove_mode: torch's pop failed");
        return NULL;
    }
    Py_RETURN_TRUE;
}

/* call_alone(mode, fn, arg, length, pop, push): fn(arg) with `mode` alone on this thread's dispatch mode stack
 * (length, pop, push: as for remove_mode). Every mode is popped, `mode` pushed, fn called, and whatever is then on
 * the stack popped and the saved modes pushed back in their order, whatever fn raises. The stack changes are C
 * calls only, so an asynchronous exception can land in fn alone, never between them. Returns fn(arg). */
PyObject *rl_call_alone(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "call_alone(mode, fn, arg, length, pop, push)");
        return NULL;
    }
    PyObject *mode = args[0], *fn = args[1], *length = args[3], *pop = args[4], *push = args[5];
    PyObject *n_obj = PyObject_CallNoArgs(length);
    Py_ssize_t n = n_obj ? PyLong_AsSsize_t(n_obj) : -1;
    Py_XDECREF(n_obj);
    if (n < 0) { /* length() raised, or gave what no stack's size is */
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "call_alone: length() gave %zd, not a stack size", n);
        }
        return NULL;
    }
    PyObject *saved = PyTuple_New(n); /* bottom first */
    if (!saved) {
        return NULL;
    }
    Py_ssize_t popped = 0;
    PyObject *out = NULL, *exc = NULL;
    for (; popped < n; popped++) {
        PyObject *m = PyObject_CallNoArgs(pop);
        if (!m) {
            break;
        }
        PyTuple_SET_ITEM(saved, n - 1 - popped, m);
    }
    int pushed = 0;
    if (popped == n) {
        PyObject *r = PyObject_CallOneArg(push, mode);
        pushed = r != NULL;
        Py_XDECREF(r);
        if (pushed) {
            out = PyObject_CallOneArg(fn, args[2]);
        }
    }
    exc = out ? NULL : take_exception();
    for (;;) { /* take off what is there now: the mode (and anything fn left) */
        PyObject *k_obj = PyObject_CallNoArgs(length);
        Py_ssize_t k = k_obj ? PyLong_AsSsize_t(k_obj) : -1;
        Py_XDECREF(k_obj);
        if (k <= 0 || popped < n) { /* a failed pop above: the stack holds the modes not yet popped */
            if (k < 0) {
                exc = chain_exceptions(exc, take_exception());
            }
            break;
        }
        PyObject *m = PyObject_CallNoArgs(pop);
        if (!m) {
            exc = chain_exceptions(exc, take_exception());
            break;
        }
        Py_DECREF(m);
    }
    for (Py_ssize_t j = n - popped; j < n; j++) {
        PyObject *r = PyObject_CallOneArg(push, PyTuple_GET_ITEM(saved, j));
        if (!r) {
            exc = chain_exceptions(exc, take_exception());
        }
        Py_XDECREF(r);
    }
    Py_DECREF(saved);
    if (exc) {
        Py_XDECREF(out);
        raise_exception(exc);
        return NULL;
    }
    return out;
}

int rl_block_lock_init(void) {
    if (block_lock) {
        return 0;
    }
    if (!(block_lock = PyThread_allocate_lock())) {
        PyErr_NoMemory();
        return -1;
    }
#ifndef _WIN32
    if (pthread_atfork(NULL, NULL, block_after_fork_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "roofline._core: pthread_atfork failed");
        return -1;
    }
#endif
    return 0;
}
