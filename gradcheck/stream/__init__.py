"""The crash-safe JSON-lines result stream: :mod:`.writer` appends each result the moment it
exists, :mod:`.reader` reads any number of streams back (tolerating truncated or foreign lines),
:mod:`.fields` validates each record's fields, :mod:`.environment` describes the machine.
"""

from gradcheck.stream.reader import (
    RunInfo,
    StreamData,
    StreamProblem,
    TestOutcome,
    collect_sources,
    expand_sources,
    read_streams,
)
from gradcheck.stream.writer import (
    ENV_VAR,
    ResultStream,
    activate,
    active,
    current_test_id,
    deactivate,
    record,
    record_many,
    set_test_id,
    suspended,
    using,
    write_record,
)

__all__ = [
    "ENV_VAR", "ResultStream", "RunInfo", "StreamData", "StreamProblem", "TestOutcome",
    "activate", "active", "collect_sources", "current_test_id", "deactivate", "expand_sources",
    "read_streams",
    "record", "record_many", "set_test_id", "suspended", "using", "write_record",
]
