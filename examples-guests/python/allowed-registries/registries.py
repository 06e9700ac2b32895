"""Which registry an image comes from, and whether a list of allowed prefixes admits it.

Pure Python (no `wit_world`), so `registries_test.py` runs under a plain interpreter.

An image reference is normalised as the container runtimes do (distribution's reference
grammar): its first path component is a registry host when it contains `.` or `:` or is
`localhost`; otherwise the registry is `docker.io`, and a single-component name is in
`library/`. So `nginx:1.27` is `docker.io/library/nginx`, `bitnami/redis` is
`docker.io/bitnami/redis`, `ghcr.io/acme/app@sha256:...` is `ghcr.io/acme/app`.
`index.docker.io` is `docker.io`. The tag and digest are not part of the name.

An allowed entry is a registry host (`ghcr.io`) or a host and a repository prefix
(`docker.io/library`, `ghcr.io/acme`). It admits a name equal to it or under it at a `/`:
`ghcr.io/acme` admits `ghcr.io/acme/app`, not `ghcr.io/acme-corp/app`; `registry.example.com`
does not admit `registry.example.com.evil.io/app`. Entries are normalised like names (the host
lower-cased, a trailing `/` dropped; a bare `nginx` is no registry and admits nothing but
`docker.io/library/nginx`).
"""

from typing import Optional

#: The longest image reference looked at (the API server allows far less in practice).
MAX_IMAGE = 4096


def _is_host(component: str) -> bool:
    return "." in component or ":" in component or component == "localhost"


def _host(component: str) -> str:
    host = component.lower()
    return "docker.io" if host == "index.docker.io" else host


def _split_host(reference: str) -> tuple[str, str]:
    first, slash, rest = reference.partition("/")
    if slash and _is_host(first):
        return _host(first), rest
    return "docker.io", reference


def image_name(image: str) -> Optional[str]:
    """The normalised name (`registry/repository`, no tag or digest) of an image reference, or
    None when it is not one (empty, too long, whitespace or control characters)."""
    if not image or len(image) > MAX_IMAGE or any(c.isspace() or ord(c) < 0x20 for c in image):
        return None
    reference = image.split("@", 1)[0]
    host, path = _split_host(reference)
    # A tag follows the last `:` of the last path component (a `:` before a `/` is a port).
    last = path.rfind("/")
    colon = path.rfind(":")
    if colon > last:
        path = path[:colon]
    if not path or path.startswith("/") or path.endswith("/") or "//" in path:
        return None
    if host == "docker.io" and "/" not in path:
        path = "library/" + path
    return f"{host}/{path}"


def parse_allowed(text: str) -> list[str]:
    """The entries of a ConfigMap value: one per line; blank lines and `#` comments are
    skipped; each is normalised (see the module's doc)."""
    entries = []
    for line in text.splitlines():
        entry = line.split("#", 1)[0].strip().rstrip("/")
        if not entry:
            continue
        if "/" not in entry:
            entries.append(_host(entry) if _is_host(entry) else f"docker.io/library/{entry}")
            continue
        host, path = _split_host(entry)
        entries.append(f"{host}/{path}")
    return entries


def admitted(name: str, allowed: list[str]) -> bool:
    """Whether the normalised image `name` is one of `allowed` or under one at a `/`."""
    return any(name == entry or name.startswith(entry + "/") for entry in allowed)
