"""The stream path: rows in from a source, the learner's loop, snapshots out.

- :mod:`~streammn.stream.source`: :class:`~streammn.stream.source.Batch` and
  :class:`~streammn.stream.source.Source`, the contract every connector implements.
- :mod:`~streammn.stream.engine`: :class:`~streammn.stream.engine.StreamLearner`, the loop that
  feeds a learner batch by batch and decides when a snapshot is due; its resume checks
  (:mod:`~streammn.stream.resume_guard`), its progress line (:mod:`~streammn.stream.progress`)
  and the loading of the writer's kernels (:mod:`~streammn.stream.warmup`) are apart.
- :mod:`~streammn.stream.snapshot`: snapshot directories, atomic and checksummed, and reading
  them back; :mod:`~streammn.stream.publishing` writes them from a forked child.
"""
