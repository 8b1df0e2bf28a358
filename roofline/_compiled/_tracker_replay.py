"""Which modules the eager module tracker would hold active while each op of a compiled backward graph runs.

In eager mode roofline (like ``FlopCounterMode``) follows ``torch.utils.module_tracker.ModuleTracker``'s rule for the
backward pass: a module becomes active when the gradients of all its outputs have been computed and stays active
until the gradients of all its inputs have been (``register_multi_grad_hook`` on each side); every op that runs in
between is credited to it. A downsample branch that shares its input with the main branch of a residual block is
therefore also credited with the main branch's backward, which runs while the shared input's gradient is incomplete.

A compiled backward graph runs as one kernel sequence without those hooks, and its nodes carry only the forward
node they differentiate (``seq_nr``, ``fwd_nn_module_stack``). To give its ops the module sets the eager run would
give them (so that ``r.by_module()`` and ``r.flop_counter_compatible()`` are those of the same step run eagerly),
this module replays the eager autograd engine over the forward graph: autograd nodes are the forward graph's groups
of nodes with one sequence number; a node runs once every node that consumes its outputs has run, the ready node with
the highest sequence number first (the CPU engine's ready queue); a leaf input's gradient (a parameter's) is
accumulated as soon as its consumers have run; an input that is not a leaf (an activation from before a graph break)
gets its gradient after the whole graph. The tracker's hooks fire when the gradients they wait for become available,
in the order the forward registered them.

Known limits: the forward graph must carry ``seq_nr`` and ``nn_module_stack`` (Dynamo and AOTAutograd write both)
and its inputs and outputs must line up with AOTAutograd's metadata; a module called twice in one graph is one call
per contiguous run of its nodes; a module with no op in the graph (``nn.Identity``) is invisible, where the eager
tracker would leave it active for the rest of the backward; a leaf input that requires grad (a user's input, not a
parameter) is not taken as a module's input, so a module it feeds stops being active once its other inputs'
gradients are complete. When there is no tape (no sequence numbers, metadata that does not line up), the ops keep the
module of the forward op they differentiate (``fwd_nn_module_stack``) and the report warns.
"""

from __future__ import annotations

import heapq
import operator

import torch

from roofline._compiled._fx_paths import node_chain

_INF = float("inf")


class ForwardTape:
    """What the emulation needs of a forward graph, taken when it is compiled: per node its sequence number, module
    stack and inputs; which values require grad; the module calls with their inputs and outputs."""

    __slots__ = ("seq_lo", "seq_hi", "groups", "consumers", "producer", "leaf_ph", "calls", "root")

    def __init__(self):
        self.seq_lo = self.seq_hi = None
        self.groups: dict = {}     # seq -> list of (fx node name, input value names requiring grad)
        self.consumers: dict = {}  # value -> set of seqs of the nodes that consume it (requiring grad)
        self.producer: dict = {}   # value -> seq of its node, or ("ph", leaf: bool) for a graph input
        self.leaf_ph: set = set()  # graph inputs that are leaves (parameters): accumulated, not module inputs
        self.calls: list = []      # (position, kind, (root, path), value names): kind "out" pushes, "in" pops
        self.root = None


def forward_tape(gm, input_requires_grad=None, input_is_leaf=None, n_user_outputs=None, n_mutated=0):
    """The ForwardTape of a forward FX graph (None when its nodes carry no sequence numbers).
    ``input_requires_grad`` / ``input_is_leaf``: per placeholder (AOTAutograd's ``fw_metadata.input_info``); when
    absent every floating-point input is taken to require grad and to be a leaf. ``n_user_outputs``: how many of the
    graph's outputs (after ``n_mutated`` mutated inputs) are the user's (the rest are saved for backward)."""

    tape = ForwardTape()
    rg: dict = {}
    alias: dict = {}  # getitem node -> the node it takes from
    nodes: list = []  # (position, node name, seq, stack chain, input value names)
    ph_i = 0
    output_node = None
    for pos, node in enumerate(gm.graph.nodes):
        if node.op == "placeholder":
            val = node.meta.get("val")
            flt = isinstance(val, torch.Tensor) and (val.is_floating_point() or val.is_complex())
            req = flt if input_requires_grad is None or ph_i >= len(input_requires_grad) \
                else bool(input_requires_grad[ph_i]) and flt
            leaf = True if input_is_leaf is None or ph_i >= len(input_is_leaf) else bool(input_is_leaf[ph_i])
            rg[node.name] = req
            tape.producer[node.name] = ("ph", leaf)
            if req and leaf:
                tape.leaf_ph.add(node.name)
            ph_i += 1
        elif node.op == "output":
            output_node = node
        elif node.op == "call_function":
            if node.target is operator.getitem:
                src = node.args[0]
                alias[node.name] = alias.get(src.name, src.name)
                continue
            seq = node.meta.get("seq_nr")
            ins = [alias.get(a.name, a.name) for a in node.all_input_nodes]
            val = node.meta.get("val")
            vals = val if isinstance(val, (list, tuple)) else [val]
            flt = any(isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex()) for v in vals)
            diff = seq is not None and flt and node.target is not torch.ops.aten.detach.default
            rg[node.name] = diff and any(rg.get(u) for u in ins)
            nodes.append((pos, node.name, seq, node_chain(node) if seq is not None else (), ins))
    # a gradient reaches only values the user's outputs depend on (not, say, BatchNorm's running statistics, which
    # only feed the copies into its buffers)
    user_out = set()
    if output_node is not None:
        outs = output_node.args[0] if isinstance(output_node.args[0], (list, tuple)) else [output_node.args[0]]
        hi = len(outs) if n_user_outputs is None else n_mutated + n_user_outputs
        for a in outs[n_mutated:hi]:
            if isinstance(a, torch.fx.Node):
                user_out.add(alias.get(a.name, a.name))
    live = set(user_out)
    for _pos, name, _seq, _chain, ins in reversed(nodes):
        if name in live:
            live.update(ins)
    for v in list(rg):
        rg[v] = rg[v] and (v in live or not user_out)
    tape.leaf_ph = {v for v in tape.leaf_ph if rg[v]}
    order = []
    for pos, name, seq, chain, ins in nodes:
        if seq is None:
            continue
        ins = [u for u in ins if rg.get(u)]
        tape.producer[name] = seq
        if chain and tape.root is None:
            tape.root = chain[0][1][0]
        order.append((pos, name, seq, chain, ins))
        tape.groups.setdefault(seq, []).append((name, ins))
        if rg.get(name):  # only the differentiable forward's nodes pass gradients back
            for u in ins:
                tape.consumers.setdefault(u, set()).add(seq)
    if not tape.groups:
        return None
    tape.seq_lo, tape.seq_hi = min(tape.groups), max(tape.groups)
    # module calls: each maximal run (in graph order) of nodes whose stack holds a key
    runs: dict = {}  # key -> [path pair, first position, last position, members]
    done: list = []
    for pos, name, _seq, chain, _ins in order:
        if not rg.get(name):  # not part of the differentiable forward (a mask the partitioner moved, a statistic)
            continue
        keys = {k for k, _ in chain}
        for k, pair in chain:
            r = runs.get(k)
            if r is None:
                runs[k] = [pair, pos, pos, {name}]
            else:
                r[2] = pos
                r[3].add(name)
        for k in [k for k in runs if k not in keys]:
            done.append((k, runs.pop(k)))
    done.extend(runs.items())
    users: dict = {}  # value -> names of the nodes that use it
    for _pos, name, _seq, _chain, node_ins in order:
        if not rg.get(name):  # a gradient flows back only through the differentiable forward
            continue
        for u in node_ins:
            users.setdefault(u, set()).add(name)
    ins_of = {name: node_ins for _pos, name, _seq, _chain, node_ins in order}
    for _key, (pair, first, last, members) in done:
        ins, outs = set(), set()
        for name in members:
            for u in ins_of[name]:
                if u not in members and u not in tape.leaf_ph:
                    ins.add(u)
            if rg.get(name) and (name in user_out or not users.get(name, set()) <= members):
                outs.add(name)
        if outs:
            tape.calls.append((last + 0.5, "out", pair, frozenset(outs)))
        if ins:
            tape.calls.append((first - 0.5, "in", pair, frozenset(ins)))
    tape.calls.sort(key=lambda c: c[0])
    return tape


def replay(tape: ForwardTape) -> dict:
    """``{seq: frozenset of (root, path) module pairs}``: the modules the eager tracker holds active while the
    autograd node of each forward sequence number runs its backward."""
    # which hooks wait for which values
    waiting: dict = {}  # value -> list of hook indices
    remaining = []
    for i, (_pos, _kind, _pair, vals) in enumerate(tape.calls):
        remaining.append(len(vals))
        for v in vals:
            waiting.setdefault(v, []).append(i)
    # engine state: a node (seq) waits for the nodes that consume its outputs
    waits: dict = {s: set() for s in tape.groups}
    acc_waits: dict = {}
    for v, cons in tape.consumers.items():
        p = tape.producer.get(v)
        if isinstance(p, tuple):  # a graph input
            if p[1]:  # a leaf: accumulated once its consumers have run
                acc_waits[v] = set(cons)
            continue
        if p is not None:
            waits[p].update(c for c in cons if c != p)
    produced: dict = {}
    for s, members in tape.groups.items():
        produced[s] = [name for name, _ in members]
    active: set = set()
    result: dict = {}
    heap = [(-s, s) for s, w in waits.items() if not w]
    heapq.heapify(heap)
    ran = set()

    def ready(values):
        fired = []
        for v in values:
            for i in waiting.get(v, ()):
                remaining[i] -= 1
                if remaining[i] == 0:
                    fired.append(i)
        for i in sorted(fired):  # registration order
            _pos, kind, pair, _vals = tape.calls[i]
            if kind == "out":
                active.add(pair)
            else:
                active.discard(pair)

    def finished(s):
        for name, ins in tape.groups[s]:
            for u in ins:
                p = tape.producer.get(u)
                if isinstance(p, tuple):
                    w = acc_waits.get(u)
                    if w is not None:
                        w.discard(s)
                        if not w:
                            del acc_waits[u]
                            heapq.heappush(heap, (-_INF, u))
                elif p is not None and p != s and p not in ran:
                    w = waits[p]
                    w.discard(s)
                    if not w:
                        heapq.heappush(heap, (-p, p))

    while heap:
        _prio, item = heapq.heappop(heap)
        if isinstance(item, str):  # a leaf input's gradient is accumulated
            ready([item])
            continue
        if item in ran:
            continue
        ran.add(item)
        ready(produced[item])
        result[item] = frozenset(active)
        finished(item)
    return result
