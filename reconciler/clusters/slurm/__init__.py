"""The ``slurm`` cluster: the ``Cluster`` protocol over a real Slurm cluster's commands.

Selected by ``--server slurm://`` (the default partition) or ``slurm://PARTITION``; an optional
``?images=host|pyxis`` says how images are honoured (default: ``pyxis`` when ``srun`` has
``--container-image``, else ``host``). It runs ``sbatch``, ``squeue --json``, ``scontrol``,
``scancel`` and ``sinfo`` from the PATH. docs/slurm.md has the table of what Slurm carries.

The parts, each owning one concern (pure ones marked *)::

    cluster      SlurmCluster: the protocol's methods, under the records' lock; carries out
                 what observe decides
    records      the run records under the state folder (JSON), the one lock, the log files
    commands     sbatch, squeue, scontrol, scancel, sinfo: timeouts, errors mapped onto ClusterError
    submit       submitting jobs (--begin, --dependency) and recording each attempt
    observe    * one squeue, decided: decode, judge, the actions to carry out, the report
    decode     * squeue --json to workers in the seeds' words
    policy     * restarts, failure and lifetime: the seeds' rules over observed workers
    mapping    * spec to sbatch for one worker template; what a submitted job can change in place
    groups     * spec to sbatch for worker groups (one job per group, or one heterogeneous job)
    drives     * the drives table, and how a job mounts drives: pyxis' container mounts, or
                 bubblewrap on the node (reconciler.sandbox)
    submission * the Submission record, the comment astra writes, options both mappings share
    unsupported* what Slurm cannot carry, in words

Must not touch: the reconciler's policy (what to create, update or prune), the spec's rules,
the control plane. Facts about runs (states, final states, reasons, the restart limit and
backoff, which fields change in place) are ``reconciler.runspec.vocabulary``'s.
"""

from __future__ import annotations

from .cluster import SlurmCluster
from .mapping import replace_message

__all__ = ["SlurmCluster", "replace_message"]
