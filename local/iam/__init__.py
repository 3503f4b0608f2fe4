"""IAM as AWS enforces it, for the local engine's sandboxes and the tests: every request a function's code makes is
checked against what the function's role allows in template.yaml (after the SAM transform), with the actions AWS
authorizes per request; a request the role does not allow fails where it is made, with AccessDenied.

- ``requests.py``: the (action, resource) pairs one request needs (standard library only: the sandboxes load it)
- ``grants.py``: what each function's role allows, read from the transformed template
- ``enforce.py``: the check itself, on every botocore request of a process, for the function whose code runs
  (``acting_as``), and the tally of what was checked, denied and used

May import: ``local.template`` (the stack's transformed template, its conditions and physical names).
"""
