"""The queue core shared by every function: states, keys, the task model, settings, the DynamoDB store,
tail-call notifications, the task runner and the claim loop."""
