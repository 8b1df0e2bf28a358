"""FlopCounterMode's module names for a block that named its modules from the model's root.

``measure(model)`` names every module of ``model`` from its root before the block runs (``"VAE.encoder.fc"``), so a
module has one name whichever of the model's methods the step calls. torch's ModuleTracker (FlopCounterMode's)
names a module when it is first entered: from its own class name when no module above it was entered before
(``"Encoder.fc"`` where the step calls ``vae.encoder(x)`` without calling ``vae(x)``), and renames the children of
a module each time a module above them is entered for the first time. The two agree whenever the root's forward is
the first module call of the block; otherwise :func:`replay` replays ModuleTracker's rule over the block's module
sets, in the order they first occurred, to give :meth:`Report.flop_counter_compatible` FlopCounterMode's keys.
"""

from __future__ import annotations


def replay(model, root: str, module_sets) -> tuple[dict, str | None]:
    """``({name under root: FlopCounterMode's name}, note)`` for the names of ``module_sets`` (one tuple of names per
    module set id, ids in the order the sets first occurred) that FlopCounterMode names otherwise; ``{}`` when the root
    was entered before any module under it. ``note`` (None when none): a module FlopCounterMode renamed during the
    block (called on its own, then under a module above it entered later), whose calls it keys under both names; the
    map keeps the first."""
    prefix = root + "."
    for s in module_sets:  # the first set holding a module of the model: is the root in it?
        under = [n for n in s if n == root or n.startswith(prefix)]
        if under:
            if root in under:
                return {}, None
            break
    else:
        return {}, None
    known: dict = {}  # module -> its name under ModuleTracker's rule now (strong references, this call only)
    walked: set = set()  # ids of the modules whose children are named

    def name(mod):  # torch.utils.module_tracker.ModuleTracker._get_mod_name's rule
        if mod not in known:
            known[mod] = type(mod).__name__
        n = known[mod]
        if id(mod) not in walked:
            for attr, child in mod.named_children():
                known[child] = f"{n}.{attr}"
                name(child)
            walked.add(id(mod))
        return n

    out: dict = {}
    renamed: list = []
    for s in module_sets:
        # a set's modules were entered outer first: a module's name is made before its children's
        for n in sorted(s, key=lambda n: n.count(".")):
            if n != root and not n.startswith(prefix):
                continue
            try:
                mod = model if n == root else model.get_submodule(n[len(prefix):])
            except AttributeError:  # not a path under the model (named under another root): kept as it is
                continue
            fcm = name(mod)
            first = out.setdefault(n, fcm)
            if first != fcm and n not in renamed:
                renamed.append(n)
    note = None
    if renamed:
        note = (f"FlopCounterMode renames {', '.join(renamed[:3])}{' ...' if len(renamed) > 3 else ''} during the "
                "block (called before a module above it was entered): flop_counter_compatible() keys all its calls "
                "under its first name")
    return {n: f for n, f in out.items() if n != f}, note

