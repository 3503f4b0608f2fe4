"""The SAM transform, as ``sam deploy`` (CloudFormation) runs it: aws-sam-translator turns the template into
plain CloudFormation, so Globals, ``IgnoreGlobals``, policies and event sources mean what SAM makes of them.

Local code paths (``CodeUri``, ``ContentUri``) become ``s3://<LOCAL_BUCKET>/<path>`` before the transform (it
accepts S3 locations only) and are read back from ``Code``/``Content`` by ``local/template/template.py``."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from local.template.intrinsics import REGION, TemplateError

LOCAL_BUCKET = "local-code"


def _s3(value: Any) -> Any:
    return f"s3://{LOCAL_BUCKET}/{value}" if isinstance(value, str) and not value.startswith("s3://") else value


def transform(doc: Mapping[str, Any], parameters: Mapping[str, str], source: str = "template") -> dict[str, Any]:
    """``doc`` (a SAM template as loaded) -> CloudFormation. Raises TemplateError with SAM's own messages."""
    import boto3
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    sam = copy.deepcopy(dict(doc))
    function_globals = (sam.get("Globals") or {}).get("Function") or {}
    if "CodeUri" in function_globals:
        function_globals["CodeUri"] = _s3(function_globals["CodeUri"])
    for resource in (sam.get("Resources") or {}).values():
        props = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if key in props:
                props[key] = _s3(props[key])
    # No AWS call is made: the managed-policy map is only needed for policies named by name, and SAM attaches
    # the ones it adds itself (basic execution, X-Ray, stream reads) by ARN.
    translator = Translator(managed_policy_map={}, sam_parser=Parser(),
                            boto_session=boto3.session.Session(region_name=REGION))
    try:
        return translator.translate(sam_template=sam, parameter_values=dict(parameters),
                                    get_managed_policy_map=dict)
    except InvalidDocumentException as exc:
        causes = "; ".join(str(getattr(cause, "message", cause)) for cause in exc.causes)
        raise TemplateError(f"{source}: the SAM transform refused the template: {causes}") from None
