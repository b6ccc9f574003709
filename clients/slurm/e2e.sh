#!/usr/bin/env bash
# End-to-end run of the collsynth SPANK hook in a real Slurm on loopback
# (driven by tests/test_slurm.c, which checks what this records).
#
#   clients/slurm/e2e.sh OUT_DIR PLUGIN_SO COLLSYNTHD
#
# Starts munge, slurmctld and two slurmd (nodes n1 and n2, both on loopback)
# in a temporary directory with a generated slurm.conf whose plugstack.conf
# loads PLUGIN_SO, and collsynthd (--port 0, a temporary data directory).  Then runs one srun per scenario and records its
# stdout, stderr and exit code as OUT_DIR/<scenario>.{out,err,rc}:
#   up      collsynthd running, a GPU step (srun --gres=gpu:8; each node has 8
#           stand-in GPU devices, regular files, declared in gres.conf)
#   nogpu   collsynthd running, a step without GPUs (the hook stays silent)
#   badcluster  the cluster description cannot be read (one warning, job runs)
#   badtoken    the daemon refuses the token (one warning, job runs)
#   partial     a step on 2 of a DGX-1's 8 GPUs (one warning: MSCCL's ngpus
#               must be the communicator size; job runs unchanged)
#   copyswitch  collsynthd running, a GPU step on a node whose 8 GPUs share one
#           copy-capable switch (NVLS), method=mcf allgather: the hook asks with
#           options.codegen, so it gets a schedule MSCCL can run (without it mcf
#           solves the copy form: in-switch copies, which have no XML)
#   rooted  collsynthd running, collectives=broadcast,reduce with plugstack
#           root=2 and srun --collsynth-root=5 (the job's option wins); the
#           results the task's COLLSYNTH_RESULT_KEYS name are saved as
#           OUT/rooted.<kind>.json (GET /v1/results/KEY)
#   rootedmulti  a two-node step (8 ranks), broadcast with plugstack root=6
#           only: a root on the second node; result in OUT/rootedmulti.broadcast.json
#   badroot srun --collsynth-root=8 on an 8-rank step (one warning naming the
#           option, job runs unchanged)
#   badrootsyntax  srun --collsynth-root=abc: srun refuses its command line
#   fewsms  gpu_sms=1 (2 thread blocks per rank): the daemon refuses every
#           entry of the cached DGX-1 allgather for both runtimes, so the job
#           runs unchanged with one warning naming the limit
#   down    collsynthd stopped (the job still runs, one warning line)
#   slow    a server that accepts and never answers, timeout=1
#   multi   (run while collsynthd is up) a two-node step: both nodes build the
#           same 8-rank topology (two 4-GPU rings joined by a switch)
#   refused a stand-in daemon that serves node slices but refuses frontier entry
#           1 for the runtimes' limits: both nodes skip it, never fetching whole
#           documents (its requests: OUT/refused.requests)
# Every daemon it started is stopped on exit, whatever happens.
# Extra plugstack arguments for `up`: E2E_UP_ARGS (default: SMT with at most 2
# chunks and k = 0, which gives DGX-1 two-point frontiers in well under a second).
set -u
OUT=$1; PLUGIN=$(realpath "$2"); DAEMON=$(realpath "$3")
mkdir -p "$OUT"
D=$(mktemp -d /tmp/collsynth-slurm.XXXXXX)
chmod 755 "$D"
export SLURM_CONF=$D/etc/slurm.conf
PIDS_TO_STOP=()
log() { echo "e2e: $*" >&2; }

stop_pidfile() {  # stops the daemon whose pid is in $1 and waits for it
    local f=$1 pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f" 2>/dev/null) || return 0
    [ -n "$pid" ] || return 0
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
}
cleanup() {
    for p in "${PIDS_TO_STOP[@]}"; do
        kill "$p" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$p" 2>/dev/null
    done
    stop_pidfile "$D/run/slurmd-n1.pid"
    stop_pidfile "$D/run/slurmd-n2.pid"
    stop_pidfile "$D/run/slurmctld.pid"
    stop_pidfile "$D/run/munged.pid"
    cp "$D"/log/*.log "$OUT"/ 2>/dev/null
    rm -rf "$D"
}
trap cleanup EXIT

for tool in munged mungekey slurmctld slurmd srun sinfo scontrol; do
    command -v "$tool" >/dev/null || { log "missing $tool (scripts/deps.sh test)"; exit 77; }
done
mkdir -p "$D"/{etc,run,log,spool/ctld,spool/n1,spool/n2,munge,data,tmp}
chmod 755 "$D/munge"

# ---- munge ---------------------------------------------------------------------
mungekey --create --keyfile="$D/munge/munge.key" || exit 1
chmod 600 "$D/munge/munge.key"
munged --socket="$D/munge/sock" --key-file="$D/munge/munge.key" --pid-file="$D/run/munged.pid" \
    --log-file="$D/log/munged.log" --seed-file="$D/munge/seed" || { log "munged failed"; exit 1; }

# ---- slurm ---------------------------------------------------------------------
free_port() {  # a port nothing listens on right now (the kernel's choice)
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
write_slurm_conf() {
    cat >"$SLURM_CONF" <<EOF
ClusterName=collsynthtest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/sock
SlurmctldPort=$(free_port)
StateSaveLocation=$D/spool/ctld
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
PlugStackConfig=$D/etc/plugstack.conf
GresTypes=gpu
NodeName=n1 NodeHostname=localhost Port=$(free_port) CPUs=2 Gres=gpu:8 State=UNKNOWN
NodeName=n2 NodeHostname=localhost Port=$(free_port) CPUs=2 Gres=gpu:8 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
EOF
}
# sinfo waits its MessageTimeout (and retries) when no controller answers: a
# controller that died at startup (port taken) must not stall the loop below.
node_states() { timeout 3 sinfo -h -o %T 2>/dev/null | sort -u | tr '\n' ' '; }
ctld_alive() { pgrep -f "slurmctld -f $SLURM_CONF" >/dev/null; }
: >"$D/etc/plugstack.conf"
# Stand-in GPUs: Slurm's gres/gpu plugin hands them out and sets the step's GPU
# variables as it would for real devices.
mkdir -p "$D/dev"
{
    echo "AutoDetect=off"
    # character devices (Slurm insists), all behaving as /dev/null
    for g in 0 1 2 3 4 5 6 7; do
        mknod "$D/dev/gpu$g" c 1 3 2>/dev/null || : >"$D/dev/gpu$g"
        echo "Name=gpu File=$D/dev/gpu$g"
    done
} >"$D/etc/gres.conf"
# A port can be taken between free_port and the daemon's bind: then try again
# with fresh ports.
started=no
for attempt in 1 2 3; do
    write_slurm_conf
    slurmctld -f "$SLURM_CONF" || { log "slurmctld failed"; exit 1; }
    slurmd -f "$SLURM_CONF" -N n1 || { log "slurmd n1 failed"; exit 1; }
    slurmd -f "$SLURM_CONF" -N n2 || { log "slurmd n2 failed"; exit 1; }
    deadline=$((SECONDS + 15))
    sleep 0.2
    while [ $SECONDS -lt $deadline ] && ctld_alive; do
        [ "$(node_states)" = "idle " ] && break
        sleep 0.1
    done
    if [ "$(node_states)" = "idle " ]; then started=yes; break; fi
    log "attempt $attempt: nodes not idle ($(node_states)); retrying with other ports"
    stop_pidfile "$D/run/slurmd-n1.pid"
    stop_pidfile "$D/run/slurmd-n2.pid"
    stop_pidfile "$D/run/slurmctld.pid"
    rm -rf "$D"/spool/ctld/* "$D"/spool/n1/* "$D"/spool/n2/*
done
[ $started = yes ] || { log "Slurm did not start"; exit 1; }

# ---- collsynthd --------------------------------------------------------------------
# POST needs the token; the hook reads it from token_file
COLLSYNTH_AUTH_TOKEN=e2e-secret-token "$DAEMON" --port 0 --data-dir "$D/data" \
    >"$D/log/collsynthd.log" 2>&1 &
DAEMON_PID=$!
PIDS_TO_STOP+=("$DAEMON_PID")
URL=""
for _ in $(seq 100); do
    URL=$(grep -o -m1 -E 'https?://[^ /"]+' "$D/log/collsynthd.log" 2>/dev/null | head -n 1)
    [ -n "$URL" ] && python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/v1/health", timeout=2)' \
        "$URL" >/dev/null 2>&1 && break
    URL=""
    sleep 0.1
done
[ -n "$URL" ] || { log "collsynthd did not start:"; cat "$D/log/collsynthd.log" >&2; exit 1; }
log "collsynthd at $URL"

# ---- cluster descriptions: DGX-1 nodes; 4-GPU ring nodes -------------------------
cat >"$D/etc/cluster.json" <<EOF
{
  "name": "e2e",
  "node_types": { "dgx1": {"topology": "dgx1", "nics": [0, 4]} },
  "nodes": [ {"names": "n[1-2]", "type": "dgx1"} ],
  "fabric": {"kind": "switch", "gbps": 12.5, "alpha_us": 3.0}
}
EOF
cat >"$D/etc/cluster-quad.json" <<EOF
{
  "name": "e2e",
  "node_types": { "quad": {"topology": "ring:4", "nics": [0]} },
  "nodes": [ {"names": "n[1-2]", "type": "quad"} ],
  "fabric": {"kind": "switch", "gbps": 12.5, "alpha_us": 3.0}
}
EOF
cat >"$D/etc/cluster-nvls.json" <<EOF
{
  "name": "e2e",
  "node_types": { "nvls8": {"topology": {"name": "nvls8", "ranks": 8, "switches": [
      {"name": "nvs", "ranks": [0, 1, 2, 3, 4, 5, 6, 7], "gbps": 150, "alpha_us": 0.7,
       "copy": true}]}} },
  "nodes": [ {"names": "n[1-2]", "type": "nvls8"} ],
  "fabric": {"kind": "switch", "gbps": 12.5, "alpha_us": 3.0}
}
EOF
echo "e2e-secret-token" >"$D/etc/token"
echo "not-the-token" >"$D/etc/wrong-token"

# What each task reports: the variables the hook sets, and the files it wrote.
cat >"$D/task.sh" <<'EOF'
#!/bin/sh
env | grep -E '^(MSCCL_XML_FILES|NCCL_ALGO|MSCCL_ALGO_DIR|COLLSYNTH_RESULT_KEYS)=' | sort
if [ -n "${MSCCL_ALGO_DIR:-}" ] && [ -d "$MSCCL_ALGO_DIR" ]; then
    for f in "$MSCCL_ALGO_DIR"/*.xml; do
        echo "FILE $(basename "$f") $(grep -o '<algo[^>]*>' "$f" | head -n 1)"
    done
fi
for f in $(echo "${MSCCL_XML_FILES:-}" | tr ':' ' '); do
    [ -f "$f" ] && echo "XMLFILE $(basename "$f") $(grep -o '<algo[^>]*>' "$f" | head -n 1)"
done
echo "STEP_GPUS=${SLURM_STEP_GPUS:-}"
echo "TASK_RAN rank=${SLURM_PROCID:-?}"
EOF
chmod 755 "$D/task.sh"

run_step() {  # name, plugstack args, srun options (GPUs, nodes)
    local name=$1 args=$2 opts=$3
    echo "optional $PLUGIN $args" >"$D/etc/plugstack.conf"
    local start=$(date +%s.%N)
    env -u CUDA_VISIBLE_DEVICES TMPDIR="$D/tmp" timeout 90 srun $opts --export=ALL \
        "$D/task.sh" >"$OUT/$name.out" 2>"$OUT/$name.err"
    echo $? >"$OUT/$name.rc"
    awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f\n", b - a }' >"$OUT/$name.seconds"
    # srun returns before slurmstepd runs the hook's exit; give it a moment
    for _ in $(seq 50); do
        [ -z "$(ls -A "$D/tmp" 2>/dev/null)" ] && break
        sleep 0.1
    done
    ls "$D/tmp" >"$OUT/$name.tmp_after" 2>/dev/null
    log "$name: rc $(cat "$OUT/$name.rc") in $(cat "$OUT/$name.seconds") s"
}

COMMON="server=$URL cluster=$D/etc/cluster.json token_file=$D/etc/token"
UP_DEFAULT='timeout=40 method=smt options={"max_chunks":2,"k":0}'
ONE="-N1 -n1 -w n1"
run_step up "$COMMON ${E2E_UP_ARGS:-$UP_DEFAULT}" "$ONE --gres=gpu:8"
run_step nogpu "$COMMON timeout=5" "$ONE"
run_step multi "server=$URL cluster=$D/etc/cluster-quad.json token_file=$D/etc/token timeout=40 method=tacos" \
    "-N2 -n2 --gres=gpu:4 --label"
run_step badcluster "server=$URL cluster=$D/etc/missing.json timeout=5" "$ONE --gres=gpu:2"
run_step badtoken "server=$URL cluster=$D/etc/cluster.json token_file=$D/etc/wrong-token timeout=5" \
    "$ONE --gres=gpu:8"
run_step partial "$COMMON timeout=5" "$ONE --gres=gpu:2"
run_step copyswitch "server=$URL cluster=$D/etc/cluster-nvls.json token_file=$D/etc/token timeout=40 method=mcf collectives=allgather options={\"chunks\":2,\"min_chunks\":2,\"time_limit_s\":3}" \
    "$ONE --gres=gpu:8"

fetch_results() {  # scenario: each result its COLLSYNTH_RESULT_KEYS names, as OUT/<scenario>.<kind>.json
    local name=$1 keys pair
    keys=$(grep -m1 -o 'COLLSYNTH_RESULT_KEYS=.*' "$OUT/$name.out" | sed 's/^COLLSYNTH_RESULT_KEYS=//')
    for pair in $(echo "$keys" | tr ',' ' '); do
        python3 -c 'import sys, urllib.request
req = urllib.request.Request(sys.argv[1] + "/v1/results/" + sys.argv[2],
                             headers={"Authorization": "Bearer e2e-secret-token"})
sys.stdout.write(urllib.request.urlopen(req, timeout=10).read().decode())' \
            "$URL" "${pair#*=}" >"$OUT/$name.${pair%%=*}.json" || log "$name: cannot fetch $pair"
    done
}
run_step rooted "$COMMON timeout=40 method=smt options={\"max_chunks\":2,\"k\":0} collectives=broadcast,reduce root=2" \
    "$ONE --gres=gpu:8 --collsynth-root=5"
fetch_results rooted
run_step rootedmulti "server=$URL cluster=$D/etc/cluster-quad.json token_file=$D/etc/token timeout=40 method=tacos collectives=broadcast root=6" \
    "-N2 -n2 --gres=gpu:4 --label"
fetch_results rootedmulti
run_step badroot "$COMMON timeout=5 collectives=allgather,broadcast" "$ONE --gres=gpu:8 --collsynth-root=8"
run_step badrootsyntax "$COMMON timeout=5 collectives=broadcast" "$ONE --gres=gpu:8 --collsynth-root=abc"
run_step fewsms "$COMMON ${E2E_UP_ARGS:-$UP_DEFAULT} collectives=allgather gpu_sms=1" "$ONE --gres=gpu:8"

# the service is down: the job must run unchanged
kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null
run_step down "$COMMON timeout=3" "$ONE --gres=gpu:8"

# a server that accepts connections and never answers
python3 -c '
import socket, time, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
conns = []
end = time.time() + 60
while time.time() < end:
    s.settimeout(1.0)
    try: conns.append(s.accept()[0])
    except socket.timeout: pass
' >"$D/run/slow.port" &
SLOW_PID=$!
PIDS_TO_STOP+=("$SLOW_PID")
for _ in $(seq 50); do [ -s "$D/run/slow.port" ] && break; sleep 0.1; done
run_step slow "server=http://127.0.0.1:$(cat "$D/run/slow.port") cluster=$D/etc/cluster.json timeout=1" \
    "$ONE --gres=gpu:8"

# a daemon that slices but refuses one frontier entry for the runtimes' limits
# (422, field "runtime"): the hook must skip that entry on every node without
# falling back to whole documents (which are refused just the same); every
# request it gets is logged to OUT/refused.requests
python3 -c '
import http.server, json, sys
log = open(sys.argv[1], "a")
RING4 = {"name": "ring:4", "ranks": 4, "links": [
    {"src": a, "dst": b, "lanes": 1, "gbps": 50.0, "alpha_us": 0.5, "bidirectional": True}
    for a, b in ((0, 1), (0, 3), (1, 2), (2, 3))]}
KEY = "ab" * 32
RESULT = {"key": KEY, "method": "tacos", "reason": "e2e stand-in", "frontier": [
    {"steps": 2, "rounds": 2, "chunks": 1}, {"steps": 6, "rounds": 6, "chunks": 4}]}
class H(http.server.BaseHTTPRequestHandler):
    def answer(self, code, body, ctype="application/json"):
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(n)
        log.write("POST " + self.path + "\n"); log.flush()
        self.answer(200, json.dumps(RESULT))
    def do_GET(self):
        log.write("GET " + self.path + "\n"); log.flush()
        if self.path.startswith("/v1/topologies/"):
            return self.answer(200, json.dumps(RING4))
        if self.path.startswith("/v1/results/") and "alg=1" in self.path:
            return self.answer(422, json.dumps({"error": {"code": "limit", "field": "runtime",
                "message": "rank 0 thread block 0 (peer 1) needs 99 steps; the runtime allows 63"}}))
        if self.path.startswith("/v1/results/") and "ranks=" in self.path:
            return self.answer(200, "<algo name=\"standin\" ngpus=\"8\" minBytes=\"0\" "
                               "maxBytes=\"0\">\n</algo>\n", "application/xml")
        self.answer(404, json.dumps({"error": {"code": "not_found", "message": "no", "field": ""}}))
    def log_message(self, *a): pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.timeout = 1
import time
end = time.time() + 120
while time.time() < end:
    srv.handle_request()
' "$OUT/refused.requests" >"$D/run/refused.port" &
REFUSED_PID=$!
PIDS_TO_STOP+=("$REFUSED_PID")
: >"$OUT/refused.requests"
for _ in $(seq 50); do [ -s "$D/run/refused.port" ] && break; sleep 0.1; done
run_step refused "server=http://127.0.0.1:$(cat "$D/run/refused.port") cluster=$D/etc/cluster-quad.json token_file=$D/etc/token timeout=20" \
    "-N2 -n2 --gres=gpu:4 --label"

# the node must still be usable (a failing hook would have drained it); let the
# last job finish completing first
for _ in $(seq 100); do
    case "$(node_states)" in *complet*|*alloc*|*mix*) sleep 0.1 ;; *) break ;; esac
done
node_states >"$OUT/node_state"
exit 0
