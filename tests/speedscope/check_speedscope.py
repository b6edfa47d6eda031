#!/usr/bin/env python3
"""check_speedscope.py SCHEMA FILE: validates a speedscope file against the
file-format schema, then what the schema cannot say (frame indexes in range,
one weight per sample); prints {"profile name": [sample count, weight sum]}
as JSON. Exit status 2 when jsonschema is missing, 1 when the file is invalid."""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("python3 jsonschema is not installed", file=sys.stderr)
    sys.exit(2)

schema_path, file_path = sys.argv[1], sys.argv[2]
with open(schema_path) as f:
    schema = json.load(f)
with open(file_path) as f:
    document = json.load(f)
try:
    jsonschema.validate(document, schema)
except jsonschema.ValidationError as e:
    print(f"{file_path}: not a speedscope file: {e.message} at {list(e.absolute_path)}", file=sys.stderr)
    sys.exit(1)
frames = len(document["shared"]["frames"])
totals = {}
for profile in document["profiles"]:
    name = profile["name"]
    if len(profile["samples"]) != len(profile["weights"]):
        print(f"{name}: {len(profile['samples'])} samples, {len(profile['weights'])} weights", file=sys.stderr)
        sys.exit(1)
    for stack in profile["samples"]:
        if not stack or any(not isinstance(i, int) or i < 0 or i >= frames for i in stack):
            print(f"{name}: a sample refers to a frame out of 0..{frames - 1}: {stack}", file=sys.stderr)
            sys.exit(1)
    if name in totals:
        print(f"two profiles named {name}", file=sys.stderr)
        sys.exit(1)
    totals[name] = [len(profile["samples"]), sum(profile["weights"])]
print(json.dumps(totals))
