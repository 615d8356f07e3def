"""The browser client's files, read, hashed and compressed once at start: each answer carries an
``ETag`` and ``Last-Modified`` (a revalidation costs a 304 and no body) and is gzipped when the client
accepts it. Only the files found at start are served: a path is a key of a map, never a file name
joined to a directory, so no path can reach outside ``web/``.

Versioned URLs, without a build step: at start every page (``.html``) is rewritten to name the
stylesheets and scripts it links by ``/file?v=TAG`` (TAG: the file's content hash), and is given an
import map that sends each module's plain name (``/board.js``, as the modules import each other) to
its versioned URL. A file asked for by its current versioned URL is cached for a year without
revalidation (``immutable``); a reload revalidates the page alone (one connection: the HTTP side
closes after each answer) where it revalidated each of its some 17 files. The modules are served as
written: an import map maps the specifier after it is resolved, so a module's URL changes with its
own bytes only (no chain of hashes through the imports), and a browser without import maps asks
the plain names, answered as before (``no-cache``). A versioned URL whose tag is not the current
file's (a page from before a restart) gets the current file, revalidated like a plain name."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
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
#: A file by its plain name (a page, or a module asked for without the import map) is revalidated on
#: each use: a long max-age could mix an old module with a new one.
CACHE_CONTROL: Final = "no-cache"
#: A file by its current versioned URL is that content for ever.
CACHE_VERSIONED: Final = "public, max-age=31536000, immutable"
#: The links a page's rewrite versions: ``src="/…"`` and ``href="/…"`` naming a file served here.
_LINK = re.compile(r'\b(src|href)="(/[^"?#]+)"')
_FIRST_MODULE = re.compile(r'<script type="module"')
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
        return cls.of(path.read_bytes(), path.suffix, datetime.fromtimestamp(int(path.stat().st_mtime), UTC))

    @classmethod
    def of(cls, body: bytes, suffix: str, modified: datetime) -> StaticFile:
        packed = gzip.compress(body, compresslevel=9, mtime=0) if len(body) >= MIN_GZIP_BYTES else body
        small = len(packed) >= len(body)
        tag = hashlib.sha256(body).hexdigest()[:20]
        return cls(body, None if small else packed, TYPES[suffix], f'"{tag}"', modified)

    @property
    def version(self) -> str:
        """The tag of its versioned URL (``?v=…``): its content hash, as in its ETag."""
        return self.etag.strip('"')


class StaticFiles:
    """The files under ``root`` with a served suffix, as of construction (a server start), the pages
    rewritten to name the others by their versioned URLs (see the module's docstring)."""

    def __init__(self, root: Path) -> None:
        files = {
            "/" + path.relative_to(root).as_posix(): StaticFile.read(path)
            for path in sorted(root.rglob("*"))
            if path.is_file() and path.suffix in TYPES and "__pycache__" not in path.parts
        }
        linked = {path: found for path, found in files.items() if not path.endswith(".html")}
        # A page changes with every file it may load: its date is the latest of theirs (a client that
        # revalidates by date alone must not keep a page whose import map names old modules).
        newest = max((found.modified for found in files.values()), default=datetime.fromtimestamp(0, UTC))
        for path, found in files.items():
            if path.endswith(".html"):
                files[path] = StaticFile.of(versioned_page(found.body, linked), ".html", newest)
        files["/"] = files["/index.html"]
        self._files = files

    def has(self, path: str) -> bool:
        """Whether ``path`` names a file served here (``/`` included)."""
        return path in self._files

    def body(self, path: str) -> bytes:
        """The bytes of the file at ``path``, as served (a page served with another status)."""
        return self._files[path].body

    def respond(self, path: str, headers: Headers, query: str = "") -> Response:
        """The file at ``path``: 304 when the client's copy is current, gzipped when it accepts it;
        cached for good when ``query`` names its current version (``v=TAG``), else revalidated."""
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
        versioned = query == f"v={found.version}"
        response.headers["Cache-Control"] = CACHE_VERSIONED if versioned else CACHE_CONTROL
        response.headers["Vary"] = "Accept-Encoding"
        return response


def versioned_page(page: bytes, files: dict[str, StaticFile]) -> bytes:
    """``page`` with its links to ``files`` (``src="/app.js"``, ``href="/style.css"``) made versioned,
    and, before its first module script, an import map from every module's plain path to its
    versioned URL (the imports between modules resolve to plain paths)."""
    text = page.decode()

    def link(match: re.Match[str]) -> str:
        attribute, path = match.groups()
        found = files.get(path)
        return match[0] if found is None else f'{attribute}="{path}?v={found.version}"'

    text = _LINK.sub(link, text)
    modules = {path: f"{path}?v={found.version}" for path, found in files.items() if path.endswith(".js")}
    first = _FIRST_MODULE.search(text)
    if first is not None and modules:
        imports = json.dumps({"imports": modules}, separators=(",", ":"))
        start = first.start()
        indent = text[text.rfind("\n", 0, start) + 1 : start]
        text = f'{text[:start]}<script type="importmap">{imports}</script>\n{indent}{text[start:]}'
    return text.encode()


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
