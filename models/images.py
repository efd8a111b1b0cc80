"""Reading the images model UDFs are given: paths as the workloads store them."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from models.paths import data_dir

_JPEG_START = b"\xff\xd8\xff"  # SOI and the first marker: the signature cv2 decodes as JPEG
# the marker that ends a scan's entropy-coded data: 0xFF not followed by 0x00 (a stuffed byte),
# RST0-7 (inside the scan) or 0xFF (fill, so the match starts at the marker's own 0xFF)
_MARKER_AFTER_SCAN = re.compile(rb"\xff[^\x00\xd0-\xd7\xff]")


def resolve_image(path: str) -> Path:
    """Absolute paths as they are; relative ones (as the workload stores them) under AL_DATA_DIR."""
    candidate = Path(path)
    return candidate if candidate.is_absolute() else data_dir() / candidate


def read_image(path: str) -> np.ndarray:
    """The image at ``path`` as an HxWx3 BGR uint8 array; raises naming the path if it is
    missing, truncated or corrupt. A cut-off JPEG is caught before decoding: libjpeg would fill
    it in grey with only a warning, and the model would answer on half an image. cv2 itself
    refuses cut-off PNG, WebP, BMP and TIFF files (returns None)."""
    resolved = resolve_image(path)
    where = f"{resolved}" if str(resolved) == path else f"{resolved} (from {path!r}, under AL_DATA_DIR)"
    if not resolved.is_file():
        raise FileNotFoundError(f"image not found: {where}")
    data = resolved.read_bytes()  # checked and decoded from the same bytes
    damage = _jpeg_damage(data) if data.startswith(_JPEG_START) else None
    if damage is not None:
        raise ValueError(f"image file is {damage}: {where}")
    import cv2  # on first read: a question that shows stored boxes needs no decoder

    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) if data else None
    if image is None:
        raise ValueError(f"image file is corrupt or not an image, it cannot be decoded: {where}")
    return image


def _jpeg_damage(data: bytes) -> str | None:
    """Why a JPEG file cannot hold a whole image ('truncated …' or 'corrupt …'), else None.

    libjpeg decodes a cut-off file into a grey-padded picture and only warns on stderr, so cv2
    gives no sign of it. Instead walk the marker segments and each scan's entropy-coded data to
    the end-of-image marker: a byte search, no decoding. Bytes after that marker are allowed
    (some cameras append data). JPEG has no checksum: damage inside a scan goes unseen.
    """
    pos = 2  # after SOI
    while True:
        if pos + 2 > len(data):
            return "truncated (it ends before the JPEG end-of-image marker)"
        if data[pos] != 0xFF:
            return f"corrupt (no JPEG marker at byte {pos})"
        code = data[pos + 1]
        if code == 0xD9:  # EOI
            return None
        if code == 0xFF or 0xD0 <= code <= 0xD7:  # fill byte, or a restart marker with no length
            pos += 1 if code == 0xFF else 2
            continue
        if pos + 4 > len(data):
            return "truncated (it ends inside a JPEG segment)"
        length = int.from_bytes(data[pos + 2 : pos + 4], "big")
        if length < 2:
            return f"corrupt (a JPEG segment at byte {pos} has length {length})"
        pos += 2 + length
        if pos > len(data):
            return "truncated (it ends inside a JPEG segment)"
        if code == 0xDA:  # SOS: the scan's data runs to the next marker
            found = _MARKER_AFTER_SCAN.search(data, pos)
            if found is None:
                return "truncated (it ends inside the JPEG image data)"
            pos = found.start()
