"""A git remote's URL as a report may show it: no user name, password, token, query or fragment.

`https://user:p@ss@github.com/x?private_token=t#f` -> `https://github.com/x`;
scp-style `user:SECRET@host:path` -> `host:path`; `ssh://git:pw@host:22/x`
-> `ssh://host:22/x`. A password may itself hold `@`, `/`, `?` or `#`, so the
user part ends at the last `@` (a remote's path almost never holds one; if it
does, the report loses part of the path, never a secret). A local path is
kept as it is.
"""

from __future__ import annotations

import urllib.parse


def public(url: str) -> str:
    """`url` without credentials, query string or fragment."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        if url.startswith(("/", ".")) or ":" not in url:
            return url  # a local path
        return url.rpartition("@")[2]  # scp-style [user[:password]@]host:path
    rest = rest.rpartition("@")[2]
    parts = urllib.parse.urlsplit(f"{scheme}://{rest}")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
