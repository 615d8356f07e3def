"""The browser client's files, read, hashed and compressed once at start: each answer carries an
``ETag`` and ``Last-Modified`` (a revalidation costs a 304 and no body) and is gzipped when the client
accepts it. Only the files found at start are served: a path is a key of a map, never a file name
joined to a directory, so no path can reach outside ``web/``."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from http import HTTPStatus
from pathlib import Path
from typing import Final

from websockets.datastructures import Headers

from server.edge.transport import Response, http_response

__all__ = ["StaticFiles", "accepts_gzip", "etag_matches"]

TYPES: Final = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
#: Every file is revalidated on each use: the client's modules import each other by plain names (no
#: build step puts hashes in them), so a long max-age could mix an old module with a new one.
CACHE_CONTROL: Final = "no-cache"
#: Smaller than this, gzip saves less than its own header costs.
MIN_GZIP_BYTES: Final = 256


@dataclass(frozen=True, slots=True)
class StaticFile:
    """One file as served: its bytes, its gzip (None when gzip saves nothing) and its validators."""

    body: bytes
    gzipped: bytes | None
    content_type: str
    etag: str  # a strong tag of the identity bytes; the gzip variant's ends in "-gz"
    modified: datetime  # whole seconds, UTC (what Last-Modified can say)

    @classmethod
    def read(cls, path: Path) -> StaticFile:
        body = path.read_bytes()
        packed = gzip.compress(body, compresslevel=9, mtime=0) if len(body) >= MIN_GZIP_BYTES else body
        small = len(packed) >= len(body)
        modified = datetime.fromtimestamp(int(path.stat().st_mtime), UTC)
        tag = hashlib.sha256(body).hexdigest()[:20]
        return cls(body, None if small else packed, TYPES[path.suffix], f'"{tag}"', modified)


class StaticFiles:
    """The files under ``root`` with a served suffix, as of construction (a server start)."""

    def __init__(self, root: Path) -> None:
        self._files = {
            "/" + path.relative_to(root).as_posix(): StaticFile.read(path)
            for path in sorted(root.rglob("*"))
            if path.is_file() and path.suffix in TYPES and "__pycache__" not in path.parts
        }
        self._files["/"] = self._files["/index.html"]

    def body(self, path: str) -> bytes:
        """The bytes of the file at ``path``, as read at start (a page served with another status)."""
        return self._files[path].body

    def respond(self, path: str, headers: Headers) -> Response:
        """The file at ``path``: 304 when the client's copy is current, gzipped when it accepts it."""
        found = self._files.get(path)
        if found is None:
            return http_response(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")
        packed = found.gzipped is not None and accepts_gzip(headers.get_all("Accept-Encoding"))
        etag = found.etag[:-1] + '-gz"' if packed else found.etag
        if _fresh(found, headers):
            response = Response(HTTPStatus.NOT_MODIFIED.value, HTTPStatus.NOT_MODIFIED.phrase, Headers(), b"")
        else:
            response = http_response(
                HTTPStatus.OK, found.gzipped if packed and found.gzipped else found.body, found.content_type
            )
            if packed:
                response.headers["Content-Encoding"] = "gzip"
        response.headers["ETag"] = etag
        response.headers["Last-Modified"] = format_datetime(found.modified, usegmt=True)
        response.headers["Cache-Control"] = CACHE_CONTROL
        response.headers["Vary"] = "Accept-Encoding"
        return response


def _fresh(found: StaticFile, headers: Headers) -> bool:
    """Whether the client's copy is current (RFC 9110 13.2.2: If-None-Match, when sent, decides
    alone; If-Modified-Since is read only without it, and a date that cannot be read is ignored)."""
    tags = headers.get_all("If-None-Match")
    if tags:
        return any(etag_matches(value, found.etag) for value in tags)
    since = headers.get("If-Modified-Since")
    if since is None:
        return False
    try:
        when = parsedate_to_datetime(since)
    except (TypeError, ValueError, IndexError):
        return False
    if when.tzinfo is None:
        return False  # not an HTTP date (those are GMT)
    return found.modified <= when


def etag_matches(header: str, etag: str) -> bool:
    """Whether an If-None-Match value names ``etag`` (weak comparison: ``W/`` and our ``-gz`` variant
    suffix aside); ``*`` matches; anything that is not a quoted tag matches nothing."""
    if header.strip() == "*":
        return True
    wanted = etag.strip('"')
    for part in header.split(","):
        tag = part.strip().removeprefix("W/")
        if len(tag) >= 2 and tag[0] == tag[-1] == '"' and tag[1:-1].removesuffix("-gz") == wanted:
            return True
    return False


def accepts_gzip(values: list[str]) -> bool:
    """Whether Accept-Encoding values accept gzip (RFC 9110 12.5.3): named, or by ``*`` when not named,
    with a q above 0. A q that is not a number counts as 0: nothing is sent that was not asked for."""
    named: float | None = None
    star: float | None = None
    for value in values:
        for item in value.split(","):
            coding, _, params = item.partition(";")
            coding = coding.strip().lower()
            q = _quality(params)
            if coding in ("gzip", "x-gzip"):
                named = q if named is None else max(named, q)
            elif coding == "*":
                star = q
    if named is not None:
        return named > 0
    return star is not None and star > 0


def _quality(params: str) -> float:
    for param in params.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "q":
            try:
                q = float(value.strip())
            except ValueError:
                return 0.0
            return q if 0.0 <= q <= 1.0 else 0.0
    return 1.0
