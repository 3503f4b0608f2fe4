"""Pure rules and values, no requests: task states and their transitions, index keys, the Task model and the
CreateTasks input rules (schema), settings, errors, the clock, correlation ids, what a stream record means, the
queue's record, the delayed head, injectable concurrency, how long a claim may run, the handlers' metrics.
May import nothing of taskqueue outside core/.
"""
