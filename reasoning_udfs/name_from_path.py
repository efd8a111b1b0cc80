"""The cheap side of the paper's LFW experiment: read the person's name off the image path.

LFW stores each photo as ``<Name>/<Name>_000N.jpg``, so the label the expensive
``face_recognition`` UDF predicts is already in the file name. This UDF returns it in the same
format (underscores as spaces, e.g. "George W Bush") so the two can be compared row by row; the
reason is where in the path string the name was read, which a user can check by slicing.
"""

from __future__ import annotations

import re
from typing import Any

from reasoning_udfs.udf import ReasoningUDF

# <Name>_<digits>.<ext> as the last path component; the name is everything before the number.
_LFW_FILE = re.compile(r"(?P<name>[^/\\]+?)_\d+\.[A-Za-z0-9]+$")


def lfw_name(folder_or_stem: str) -> str:
    """The display form of an LFW name ("George_W_Bush" -> "George W Bush"), shared with
    ``face_recognition`` so both UDFs produce comparable values."""
    return folder_or_stem.replace("_", " ")


class NameFromPath(ReasoningUDF):
    name = "name_from_path"
    value_type = "string"
    reason_type = "struct<start: int, end: int>"

    def main(self, image_path: str | None) -> str | None:
        return self.main_with_reason(image_path)[0]

    def main_with_reason(self, image_path: str | None) -> tuple[str | None, dict[str, Any] | None]:
        """Null for a null path or one without an LFW file name: there is no name to read."""
        match = _LFW_FILE.search(image_path) if image_path is not None else None
        if match is None:
            return None, None
        start, end = match.span("name")
        return lfw_name(match.group("name")), {"start": start, "end": end}


name_from_path = NameFromPath()
