"""The experiment behind fetch-wait-10k.txt, kept as it ran: the read consumers' fetch.wait.max.ms
against wall, CPU and broker CPU, one task's reads at the 10k shape. It swaps the consumer pool's
factory (private attributes, on purpose: the product fixes the setting at 0).

    .venv/bin/python bench/results/scale-curve-2026-11-27/fetch_wait_experiment.py 5 0,2,10
"""
import sys, tempfile
from pathlib import Path
import psutil
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # bench/
from _clusters import ActiveGroups, ScratchClusters, Workload, create_and_fill, mirror_both_ways
import translation_reads as tr
from offset_pipeline.kafka_io import partition_records as pr

def factory_with(wait_ms):
    def make(conf):
        settings = dict(conf)
        import uuid
        settings.setdefault("group.id", f"offset-pipeline-reads-{uuid.uuid4().hex}")
        settings.update({"enable.auto.commit": False, "enable.auto.offset.store": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.partition.eof": True, "fetch.wait.max.ms": wait_ms, "log_level": 3})
        return pr._ReadConsumer(settings)
    return make

def reset_pool(wait_ms):
    pool = pr.CONSUMERS
    with pool._lock:
        for consumers in pool._idle.values():
            for c in consumers:
                c.close()
        pool._idle = {}
    pool._factory = factory_with(wait_ms)

gpt = int(sys.argv[1]) if len(sys.argv) > 1 else 5
waits = [int(w) for w in (sys.argv[2] if len(sys.argv) > 2 else "0,2,10").split(",")]
workload = Workload(100, 20, gpt, 10, 40, 7)
with tempfile.TemporaryDirectory(prefix="fw-") as tmp, ScratchClusters(Path(tmp)) as clusters:
    filled = create_and_fill(clusters, workload)
    mirror_both_ways(clusters, workload, filled.produced)
    brokers = [psutil.Process(c.pid()) for c in clusters.clusters.values()]
    bcpu = lambda: sum(p.cpu_times().user + p.cpu_times().system for p in brokers)
    with ActiveGroups(clusters, workload) as groups:
        by_key = tr.work_by_key(clusters, workload, groups)
        confs = {name: {"bootstrap.servers": b} for name, b in clusters.bootstraps.items()}
        for rnd in range(3):
            for w in waits:
                reset_pool(w)
                tr.run_once(by_key, confs, 256, 1)  # warm the new consumers
                b0 = bcpu()
                wall, cpu, statuses = tr.run_once(by_key, confs, 256, 1)
                print(f"round {rnd} wait {w:>3} ms: {wall:6.2f}s wall, {cpu:6.2f} CPU-s here, brokers {bcpu()-b0:5.2f} CPU-s  {statuses}", flush=True)
