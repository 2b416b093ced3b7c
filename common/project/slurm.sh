{% import "flags.j2" as flags with context %}
{% from "commands.j2" import script_args with context %}
#!/bin/bash
# {{ cookiecutter.project_name }} as a Slurm job: `sbatch slurm.sh`, from this directory, in the environment
# that has the requirements (sbatch passes it on). README: "Train on a Slurm cluster".
# Options given to sbatch override these lines: `sbatch --time=12:00:00 slurm.sh`.
#SBATCH --job-name={{ cookiecutter.project_slug }}
#SBATCH --nodes=1
# One task per node: torchrun, which starts the node's {{ flags.nproc }} training processes.
#SBATCH --ntasks-per-node=1
{% if cookiecutter.backend == "nccl" %}
#SBATCH --gpus-per-node={{ flags.nproc }}
{% endif %}
#SBATCH --time=04:00:00
# SIGTERM to this script 2 minutes before the time limit: training stops after its iteration, saves a checkpoint
# and the job requeues itself (below). Slurm checks the limits every 30 s and may signal up to that much earlier.
#SBATCH --signal=B:TERM@120
#SBATCH --requeue
# Every start of the job appends to one output file: <job name>-<job id>.out.
#SBATCH --open-mode=append
#SBATCH --output=%x-%j.out
# Your site's settings, if it asks for them (remove the first # of a line to use it):
##SBATCH --partition=gpu
##SBATCH --account=my-account
##SBATCH --cpus-per-task=16

set -uo pipefail

# The job's first node is the master: torchrun's rendezvous runs there, on a port of this job's own (two jobs
# may share a node).
MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"
MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))
export MASTER_ADDR MASTER_PORT
# This job, as Slurm's commands below name it: an array's task (a sweep worker) as <array id>_<task id>, since its
# SLURM_JOB_ID may be the array's own, which names every task (a stop or requeue would reach them all).
JOB="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID:-}}"
JOB="${JOB:-$SLURM_JOB_ID}"
echo "$(date '+%F %T') job $JOB, start $((${SLURM_RESTART_COUNT:-0} + 1)), on $SLURM_JOB_NODELIST"

# Slurm's stop signal for this script (the time limit's, a preemption notice's) goes on to training, on every
# node, which finishes its iteration, saves a checkpoint and exits. Through scancel, which signals the job's
# steps (not this script): srun itself, signalled, would kill its tasks outright.
signalled=0
stop_training() {
    signalled=1
    scancel --signal=TERM "$JOB" 2>/dev/null
}
trap stop_training TERM

{% if flags.sweep %}
if [ "${1:-}" = sweep ]; then
    # `sbatch --array=0-3 slurm.sh sweep`: a sweep worker a task of the array (README: "Sweep"), each trial on its node.
    srun --nodes=1 --ntasks=1 python sweep.py sweep.yaml &
else
{% endif %}
# One torchrun per node, through srun: each reads its own node rank (single quotes: on its node, not here).
srun bash -c 'exec torchrun --nnodes="$SLURM_NNODES" --node_rank="$SLURM_NODEID" --nproc_per_node={{ flags.nproc }} \
    --master_addr="$MASTER_ADDR" --master_port="$MASTER_PORT" {{ script_args(cookiecutter.backend) }}' &
{% if flags.sweep %}
fi
{% endif %}
training=$!
# A signal ends `wait` early (the trap runs): wait again until training has exited, for its status.
while wait "$training"; status=$?; kill -0 "$training" 2>/dev/null; do :; done

if [ "$status" = 0 ]; then
    echo "$(date '+%F %T') training finished"
elif [ "$signalled" = 1 ] && [ "$(squeue --noheader --jobs="$JOB" --format=%T)" = RUNNING ] \
    && ! grep -q '^save_training: *false' config.yaml; then
    # Stopped by the time limit's signal or a preemption notice, not cancelled (scancel, or a preemption that
    # Slurm requeues itself, leaves the job no longer RUNNING), and saved (save_training): back in the queue. Its
    # next start runs this script again, and the same command continues the run from its newest checkpoint.
    echo "$(date '+%F %T') training stopped (status $status): requeueing job $JOB to continue the run"
    scontrol requeue "$JOB"
else
    echo "$(date '+%F %T') training ended with status $status: the job is not requeued"
fi
exit "$status"
