"""A message's content: ordered text and image parts, checked before anything is stored.

``{"type": "text", "text"}`` and ``{"type": "image", "mime", "data"}`` (base64). Every image
passes the same checks whatever runtime it is for: an allowed MIME type, a decoded size
limit, and Pillow must decode it as that format within the pixel limits. A refusal names the
part's index. Pure: no Django, no I/O.
"""

from __future__ import annotations

import base64
import binascii
import io
from dataclasses import dataclass
from typing import Any

MIME_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF",
                "image/webp": "WEBP"}
MAX_IMAGE_BYTES = 10 * 1024 * 1024  # decoded
MAX_IMAGES = 8
MAX_TOTAL_IMAGE_BYTES = 16 * 1024 * 1024
MAX_SIDE = 8192
MAX_PIXELS = 40_000_000
MAX_TEXT = 65_536


class ContentError(ValueError):
    """Refused content; ``index`` is the offending part (None: the whole list)."""

    def __init__(self, message: str, index: int | None = None, code: str = "invalid"):
        super().__init__(message)
        self.index = index
        self.code = code


@dataclass(frozen=True)
class Image:
    mime: str
    data: str  # base64, as received (normalised: no whitespace)
    size: int  # decoded bytes
    width: int
    height: int

    def meta(self) -> dict[str, Any]:
        """What the timeline shows of an image: never its bytes."""
        return {"type": "image", "mime": self.mime, "size": self.size,
                "width": self.width, "height": self.height}


def check_image(mime: Any, data: Any, index: int | None = None) -> Image:
    if not isinstance(mime, str) or mime not in MIME_FORMATS:  # an object is unhashable
        raise ContentError(f"part {index}: mime must be one of {', '.join(MIME_FORMATS)}",
                           index)
    if not isinstance(data, str) or not data:
        raise ContentError(f"part {index}: data must be a non-empty base64 string", index)
    compact = "".join(data.split())
    if len(compact) > (MAX_IMAGE_BYTES * 4) // 3 + 4:
        raise ContentError(f"part {index}: the image is larger than "
                           f"{MAX_IMAGE_BYTES // (1024 * 1024)} MB", index)
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError):
        raise ContentError(f"part {index}: data is not valid base64", index) from None
    if len(raw) > MAX_IMAGE_BYTES:
        raise ContentError(f"part {index}: the image is larger than "
                           f"{MAX_IMAGE_BYTES // (1024 * 1024)} MB", index)
    width, height = _decode(raw, MIME_FORMATS[mime], index)
    return Image(mime=mime, data=compact, size=len(raw), width=width, height=height)


def _decode(raw: bytes, fmt: str, index: int | None) -> tuple[int, int]:
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    try:
        with PILImage.open(io.BytesIO(raw)) as img:
            actual, (width, height) = img.format, img.size
            if actual != fmt:
                raise ContentError(f"part {index}: the data is {actual or 'not an image'}, "
                                   f"not the declared {fmt}", index)
            if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
                raise ContentError(f"part {index}: {width}x{height} pixels exceeds the limit "
                                   f"({MAX_SIDE} per side, {MAX_PIXELS} in all)", index)
            img.load()  # a truncated or corrupt image fails here, not in the runtime
    except ContentError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError,
            PILImage.DecompressionBombError):
        raise ContentError(f"part {index}: the data does not decode as an image", index) \
            from None
    return width, height


def parse_parts(parts: Any) -> list[str | Image]:
    """The ordered parts: a ``str`` per text part, an ``Image`` per image part."""
    if not isinstance(parts, list) or not parts:
        raise ContentError("content must be a non-empty list of parts")
    out: list[str | Image] = []
    total = images = 0
    for index, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str) or not text.strip():
                raise ContentError(f"part {index}: text must be a non-blank string", index)
            if len(text) > MAX_TEXT:
                raise ContentError(f"part {index}: text is longer than {MAX_TEXT}", index)
            out.append(text)
        elif kind == "image":
            image = check_image(part.get("mime"), part.get("data"), index)
            images += 1
            total += image.size
            if images > MAX_IMAGES:
                raise ContentError(f"part {index}: at most {MAX_IMAGES} images", index)
            if total > MAX_TOTAL_IMAGE_BYTES:
                raise ContentError(f"part {index}: the images add up to more than "
                                   f"{MAX_TOTAL_IMAGE_BYTES // (1024 * 1024)} MB", index)
            out.append(image)
        else:
            raise ContentError(f"part {index}: type must be 'text' or 'image'", index)
    return out


def text_of(parts: list[str | Image]) -> str:
    """The text parts joined (what text-only paths and summaries read)."""
    return "\n\n".join(p for p in parts if isinstance(p, str))


def stored(parts: list[str | Image]) -> list[dict[str, Any]]:
    """Parts as kept with the turn's input (the database row, durable)."""
    return [{"type": "text", "text": p} if isinstance(p, str) else
            {"type": "image", "mime_type": p.mime, "data": p.data, "size": p.size,
             "width": p.width, "height": p.height} for p in parts]


def timeline_meta(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored parts as the timeline shows them: text, and images as metadata only."""
    return [{"type": "text", "text": p.get("text", "")} if p.get("type") == "text" else
            {"type": "image", "mime": p.get("mime_type"), "size": p.get("size"),
             "width": p.get("width"), "height": p.get("height")} for p in parts]
