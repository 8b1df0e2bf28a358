"""The step loops, above the report: ``_steady`` (the steady repeat of a step function), ``_schedule``
(steps of the user's loop by a schedule, a steady report per cycle), ``_monitor`` (per-step MFU)."""
