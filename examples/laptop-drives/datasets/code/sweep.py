"""The seeds' sweep, in small: read this copy's index, write /results/<index>.json.

Runs inside a worker of the local cluster, with the datasets drive at /data (read-only) and the
results drive at /results (read-write): examples/laptop-drives/sweep.yaml.
"""

import json
import os

index = int(os.environ["ASTRAEUS_ARRAY_TASK_ID"])
size = int(os.environ["ASTRAEUS_ARRAY_SIZE"])
rates = [0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3]
try:
    open("/data/written-by-a-worker", "w").close()
    read_only = False
except OSError as exc:  # the datasets drive is ReadOnly: EROFS
    read_only = exc.errno == 30
result = {"index": index, "size": size, "lr": rates[index % len(rates)], "datasets_read_only": read_only}
with open(f"/results/{index:03d}.json", "w") as out:
    json.dump(result, out)
print(f"copy {index} of {size}: lr={result['lr']}, /data read-only: {read_only}")
