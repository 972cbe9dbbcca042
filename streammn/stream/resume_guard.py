"""What a resumed run must keep from the snapshot it continues: the learner and its settings.

A snapshot's learner state means something only with the settings it was learned under: resumed
with another split criterion or another learner, the run would continue a model no single
setting describes. So a run that resumes compares its learner with the snapshot manifest's
(class and ``settings``) and refuses any difference, except in the settings the learner's
parameter table marks ``resume=True`` (those that do not change what is learned, such as thread
counts; :mod:`streammn.params`). The error names the setting, both values and the way out.
"""

from __future__ import annotations

import json

from streammn.errors import ResumeSettingsError, SettingsError
from streammn.params import new_names, resume_may_change


def check_resume_settings(snapshot, manifest: dict, learner) -> None:
    """Refuse to resume ``manifest``'s learner state as ``learner`` when the class or a
    setting that shapes the model differs (:class:`ResumeSettingsError`)."""
    recorded = manifest.get("learner") or {}
    cls = type(learner).__name__
    if recorded.get("class") not in (None, cls):
        raise ResumeSettingsError(snapshot, "learner", recorded["class"], cls)
    # a snapshot from before a parameter was renamed records it under its old name
    old_params = new_names(type(learner), recorded.get("params") or {}, SettingsError, warn=False)
    free = resume_may_change(type(learner))
    requested = json.loads(json.dumps(learner.settings()))  # as the manifest stores them
    for name, value in requested.items():
        if name in old_params and name not in free and old_params[name] != value:
            raise ResumeSettingsError(snapshot, name, old_params[name], value)
