"""The parts of logging one call record, old and new side by side in one process.

The old call log's module is loaded from a checkout from before functai._codec
(``--before``, e.g. a worktree of an older commit); each part is timed in
interleaved rounds, process CPU time, median round.

    FUNCTAI_LOAD_PLUGINS= PYTHONPATH=. python benchmarks/bench_calllog_parts.py --before <checkout> [--rounds 21] [--n 3000]
"""
import argparse, importlib.util, os, sys, time, statistics, tempfile, json
import functai
from functai import ai, _codec as codec
from functai._calls import records
from functai.testing import ScriptedLM
import attrs
import msgspec
parser = argparse.ArgumentParser()
parser.add_argument("--before", required=True, help="a checkout whose functai/_calls/records.py is the old call log")
parser.add_argument("--rounds", type=int, default=21)
parser.add_argument("--n", type=int, default=3000)
args = parser.parse_args()
spec = importlib.util.spec_from_file_location("functai._calls._records_before",
                                              os.path.join(args.before, "functai", "calls", "records.py"))
old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)
@ai
def capital(country: str) -> str:
    """The capital city of the country."""
with functai.settings(client=ScriptedLM(reply=lambda r: "Lima")):
    rec = capital.run("Peru").record
tmp = tempfile.mkdtemp()
data = rec.to_dict()
line = codec.dumps(data) + b"\n"
raw = msgspec.json.Encoder(enc_hook=codec._default).encode
enc_old = json.JSONEncoder(ensure_ascii=False, default=str)
records.append(os.path.join(tmp, "new"), rec)
new_log = records._by_folder[os.path.join(tmp, "new")]
old.append(os.path.join(tmp, "old"), rec)
old_log = next(iter(old._logs.values()))
fd = os.open(os.path.join(tmp, "bare"), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
names = [field.name for field in attrs.fields(records.CallRecord)]
struct = msgspec.defstruct("_Line", names)(*(data.get(name, msgspec.UNSET) for name in names))
encode = records._line_encoder()
struct_line = raw(struct)
assert struct_line == encode(rec) == line[:-1]


def nan_check(out: bytes) -> bool:
    """What the line encoder adds to the encoding when a record's data fields are not plainly finite."""
    r = rec
    return out.count(b"null") != (r.parent is None) + (r.output is None) + (r.error is None) \
        + (r.instruction is None) + (r.model is None) + (r.finish_reason is None) + (r.reasoning is None) \
        + (r.seconds is None) + (r.conversation is None)


cases = {
    "old: to_dict (comprehension)": lambda: old.CallRecord.to_dict(rec),
    "new: to_dict (one display)": rec.to_dict,
    "old: json encode + str.encode": lambda: (enc_old.encode(data) + "\n").encode(),
    "codec.dumps of to_dict's dict (with the NaN check)": lambda: codec.dumps(data, non_finite="text"),
    "msgspec encode of the dict alone": lambda: raw(data),
    "new: the line encoder (record → line, the NaN check included)": lambda: encode(rec),
    "msgspec encode of logline's Struct alone": lambda: raw(struct),
    "counting nulls against Nones (the NaN check of a record with tool calls, changes …)": lambda: nan_check(struct_line),
    "old: _Log.append (flock, fstat, write, unlock)": lambda: old_log.append(line),
    "new: LineFile.append (write, fstat)": lambda: new_log.append(line),
    "os.write alone": lambda: os.write(fd, line),
    "os.fstat alone": lambda: os.fstat(fd),
    "os.lseek alone": lambda: os.lseek(fd, 0, os.SEEK_CUR),
    "old: records.append (all)": lambda: old.append(os.path.join(tmp, "old"), rec),
    "new: records.append (all)": lambda: records.append(os.path.join(tmp, "new"), rec),
}
rounds, n = args.rounds, args.n
res = {k: [] for k in cases}
for _ in range(rounds):
    for k, f in cases.items():
        c = time.process_time()
        for _ in range(n):
            f()
        res[k].append((time.process_time() - c) / n * 1e6)
print(f"{rounds} interleaved rounds x {n}, load average {os.getloadavg()[0]:.1f}; process CPU µs per operation, median round")
print("| part | CPU µs |")
print("|---|---|")
for k, v in res.items():
    print(f"| {k} | {statistics.median(v):.2f} |")
