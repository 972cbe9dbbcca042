"""What a resumed run must keep from the snapshot it continues: the learner and its settings.

A snapshot's learner state means something only with the settings it was learned under: resumed
with another split criterion or another learner, the run would continue a model no single
setting describes. So a run that resumes compares its learner with the snapshot manifest's
(class and ``get_params``) and refuses any difference, except in the settings the learner's
parameter table marks ``resume=True`` (those that do not change what is learned, such as thread
counts; :mod:`streammn.params`). The error names the setting, both values and the way out.
"""

from __future__ import annotations

import json

from streammn.errors import SettingsError
from streammn.params import resume_may_change


class ResumeSettingsError(SettingsError):
    """A resumed run asks for a learner setting other than the snapshot's: ``option`` (the
    learner's parameter name, ``"learner"`` for its class), ``snapshot_value`` and
    ``requested_value``."""

    def __init__(self, snapshot, option: str, snapshot_value, requested_value):
        self.option, self.snapshot_value, self.requested_value = (
            option,
            snapshot_value,
            requested_value,
        )
        if option == "learner":
            what = (
                f"the snapshot holds a {snapshot_value} learner, this run uses "
                f"{requested_value}; resume with the same learner"
            )
        else:
            what = (
                f"the snapshot was learned with {option}={snapshot_value!r}, this run asks "
                f"for {option}={requested_value!r}; resume with the snapshot's setting"
            )
        super().__init__(f"{snapshot}: {what} or start a new snapshot directory")


def check_resume_settings(snapshot, manifest: dict, learner) -> None:
    """Refuse to resume ``manifest``'s learner state as ``learner`` when the class or a
    setting that shapes the model differs (:class:`ResumeSettingsError`)."""
    recorded = manifest.get("learner") or {}
    cls = type(learner).__name__
    if recorded.get("class") not in (None, cls):
        raise ResumeSettingsError(snapshot, "learner", recorded["class"], cls)
    old_params = recorded.get("params") or {}
    free = resume_may_change(type(learner))
    requested = json.loads(json.dumps(learner.get_params()))  # as the manifest stores them
    for name, value in requested.items():
        if name in old_params and name not in free and old_params[name] != value:
            raise ResumeSettingsError(snapshot, name, old_params[name], value)
