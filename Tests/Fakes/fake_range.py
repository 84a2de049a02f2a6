"""Range and If-Range for every fake (RFC 9110 §14.2 and §13.1.5), so the fakes answer ranged GETs alike.

    status, start, end = fake_range.plan(self.headers.get("Range"), len(data),
                                         etag=etag, if_range=self.headers.get("If-Range"))
    body = data[start:end + 1]          # end is inclusive; 416 gives an empty slice
    headers += fake_range.headers(status, start, end, len(data))

One `bytes=` range per request: `a-b`, `a-` and (with suffix=True) `-n`. What a fake does with anything else
(other units, lists, garbage) is its API's documented behaviour, chosen by `malformed`: "ignore" (200, the whole
body), "416" or "400". If-Range is evaluated when the fake has a strong tag (`etag`): a value other than it makes
the Range ignored (200). A first byte at or past the end, or a last byte before the first, is 416.
"""

import re

_RANGE = re.compile(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*")


def plan(header, size, etag=None, if_range=None, suffix=True, malformed="ignore"):
    """(status, start, end) for a GET of `size` bytes: 200 with (0, size - 1), 206, 416, or 400 per `malformed`."""
    whole = (200, 0, size - 1)
    if header is None or header.strip() == "":
        return whole
    if etag is not None and if_range is not None and if_range.strip() != etag:
        return whole
    m = _RANGE.fullmatch(header)
    if not m or (m.group(1) == "" and (m.group(2) == "" or not suffix)):
        if malformed == "ignore":
            return whole
        return (int(malformed), 0, -1)
    if m.group(1) == "":
        n = int(m.group(2))
        if n == 0 or size == 0:
            return (416, 0, -1)
        return (206, max(0, size - n), size - 1)
    start = int(m.group(1))
    end = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
    if start >= size or end < start:
        return (416, 0, -1)
    return (206, start, end)


def headers(status, start, end, size, shift=0):
    """The Content-Range header for an answer of `plan` (none for 200/400); `shift` moves a 206's range (a fault)."""
    if status == 206:
        return [("Content-Range", f"bytes {start + shift}-{end + shift}/{size}")]
    if status == 416:
        return [("Content-Range", f"bytes */{size}")]
    return []


if __name__ == "__main__":
    # Self-check, table-driven: python3 Tests/Fakes/fake_range.py (ProviderTests run it too).
    cases = [
        ((None, 10), {}, (200, 0, 9)),
        (("bytes=0-3", 10), {}, (206, 0, 3)),
        (("bytes=4-", 10), {}, (206, 4, 9)),
        (("bytes=4-99", 10), {}, (206, 4, 9)),
        (("bytes=-3", 10), {}, (206, 7, 9)),
        (("bytes=-30", 10), {}, (206, 0, 9)),
        (("bytes=-3", 10), {"suffix": False}, (200, 0, 9)),
        (("bytes=-3", 10), {"suffix": False, "malformed": "400"}, (400, 0, -1)),
        (("bytes=10-", 10), {}, (416, 0, -1)),
        (("bytes=5-4", 10), {}, (416, 0, -1)),
        (("bytes=0-1,3-4", 10), {}, (200, 0, 9)),
        (("bytes=0-1,3-4", 10), {"malformed": "416"}, (416, 0, -1)),
        (("items=0-1", 10), {"malformed": "416"}, (416, 0, -1)),
        (("bytes=2-3", 10), {"etag": '"v1"', "if_range": '"v1"'}, (206, 2, 3)),
        (("bytes=2-3", 10), {"etag": '"v1"', "if_range": '"v2"'}, (200, 0, 9)),
        (("bytes=2-3", 10), {"etag": '"v1"', "if_range": 'W/"v1"'}, (200, 0, 9)),
        (("bytes=0-", 0), {}, (416, 0, -1)),
    ]
    for (header, size), options, expected in cases:
        got = plan(header, size, **options)
        assert got == expected, f"{header!r} {size} {options}: {got} != {expected}"
    assert headers(206, 2, 3, 10) == [("Content-Range", "bytes 2-3/10")]
    assert headers(206, 2, 3, 10, shift=1) == [("Content-Range", "bytes 3-4/10")]
    assert headers(416, 0, -1, 10) == [("Content-Range", "bytes */10")]
    print(f"fake_range: {len(cases)} cases ok")
