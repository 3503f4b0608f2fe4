"""The local engine: runs the project's real handlers against an embedded, serialized AWS emulator,
wired the way template.yaml says (see docs/local-engine.md)."""
