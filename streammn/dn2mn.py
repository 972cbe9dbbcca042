"""The old path of :mod:`streammn.dn_to_mn` (DN2MN's closed-form conversion), kept so that
``from streammn.dn2mn import dn2mn`` still works; it warns. The module was renamed because a
submodule named like the function shadowed ``streammn.dn2mn``, the function, once anything had
imported it."""

import warnings

from streammn.dn_to_mn import DN2MNError, dn2mn, marginals_from_rows

__all__ = ["DN2MNError", "dn2mn", "marginals_from_rows"]

warnings.warn(
    "streammn.dn2mn (the module) is streammn.dn_to_mn now; import the function as "
    "`from streammn import dn2mn`",
    DeprecationWarning,
    stacklevel=2,
)
