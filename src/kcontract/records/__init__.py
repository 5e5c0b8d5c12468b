"""Records: what a check leaves behind that others can rely on later.

The results store (:mod:`.store`: every run's JSON in SQLite, history, verdict changes),
certificates of conformance (:mod:`.certify`: levels, content hash, verify, rerun), recordings
of a protocol's calls and the arbitration of two of them (:mod:`.arbitrate`), and the
Ed25519 key that signs stored runs and certificates (:mod:`.signing`, hidden from
sandboxed workers).
"""
