"""taskq: the operator CLI of the serverless task queues (see docs/operations.md)."""
