#!/usr/bin/env bash
# The GPU checks of a release, on a machine with an NVIDIA GPU and its own Python (no set-up):
#   scripts/gpu_checks.sh OUTPUT_DIR [STEP ...]
# Steps: test-gpu (the gpu-marked tests, GPU_WORKERS=4 pytest workers, each taking whole files,
# GPU_DIST=load: single tests; summary kept in results/), test-gpu:PATH[,PATH]
# (those test files only, their summary appended to results/, for a run split over calls
# that each have a time limit; GPU_TESTS_K=EXPR: only the tests pytest -k EXPR selects), bench-library, lab00 ..
# lab05 (each at its default size; lab00: vector add and transposes against the copy, 8192), lab04-1000 (every boundary guard), run-to-run (the
# spread between repeated timings of lab 05's TMA kernel at 8192), autotune-noise (each TMA
# candidate at 512-2048 timed by three clocks, and the autotuner's picks with two), launch-overhead (small
# GEMMs timed with and without the harness's hold, and the host's time per call), check-sanitize (what
# make check prints, plain and with SANITIZE=1, for a kernel whose only fault is a read past
# its inputs), grade (exercise 01's folder of tests/grading/submissions.py graded with
# performance points, JOBS=1 then JOBS=4, the grades compared; GRADE_JOBS=4 runs one of them), simt-top (lab 06's rungs and
# its tile sweep against cuBLAS), grade-04 (exercise 04's folder: the solution, the stub and
# four known-wrong pipelines, graded with performance points beside lab 08's kernel), grade-00
# (exercise 00's solution, stub and known-wrong transposes graded on the GPU and the cpu backend:
# tests/test_exercise_00.py's grader test), grade-sharded
# (exercise 01's folder graded as 3 tasks by the cluster's grader, CLUSTER=local, and by one
# JOBS=4 run, the grades compared, performance points aside), profile (Nsight Compute counters of every rung at 4096^3),
# profile-fp16 (the same for lab 07's matrix-core rungs and cuBLAS in fp16), profile-hopper
# (lab 08's wgmma rungs and cuBLAS in fp16), profile-lab00 (lab 00's three C transposes at 8192 x 8192:
# sectors per request, shared-memory wavefronts and bank conflicts), dynamic-shared
# (lab 07's pipeline with its stages in dynamic shared memory, larger configurations timed),
# notebooks (every labs/*/lab.ipynb executed at its GPU size, outputs and plots kept, into
# results/notebooks/<lab>.ipynb: scripts/execute_notebooks.py; notebooks:05,07 those labs only,
# for a run split over calls that each have a time limit; where this Python has no
# nbclient and ipykernel they are installed into build/notebook-env/ from build/notebook-wheels/,
# which `make notebook-wheels` makes on a machine with PyPI).
# Default: all of them.
# A summary and one tarball (the logs, and the results/ files this run wrote), remade after every
# step, go to OUTPUT_DIR.
set -uo pipefail
out=${1:?usage: scripts/gpu_checks.sh OUTPUT_DIR [STEP ...]}
shift
steps=${*:-test-gpu bench-library lab00 lab01 lab02 lab03 lab04 lab04-1000 lab05 lab07 lab08 run-to-run autotune-noise launch-overhead check-sanitize grade grade-00 grade-04 grade-sharded simt-top profile profile-fp16 profile-hopper profile-lab00 dynamic-shared notebooks}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
logs=$(mktemp -d)
touch "$logs/began"
mkdir -p "$out"
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}     # the harness, without installing it
# The device's name as results/ spells it ('nvidia-h200'): the harness's own Device.slug.
device=$("$py" -c 'from kernelcourse.device import detect; print(detect().slug)') \
  || { echo "the harness cannot say which GPU this is (see the error above)"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$logs/gpu.txt"

run_step() {
  case $1 in
    test-gpu)      "$py" -m pytest -m gpu tests -n "${GPU_WORKERS:-4}" --dist "${GPU_DIST:-loadfile}" --no-loadscope-reorder \
                     -rA -p no:cacheprovider --durations=10 ;;
    test-gpu:*)    IFS=, read -ra paths <<< "${1#test-gpu:}"
                   selected=(); [ -n "${GPU_TESTS_K:-}" ] && selected=(-k "$GPU_TESTS_K")
                   "$py" -m pytest -m gpu "${paths[@]}" "${selected[@]}" -n "${GPU_WORKERS:-4}" --dist "${GPU_DIST:-loadfile}" \
                     --no-loadscope-reorder -rA -p no:cacheprovider --durations=10 ;;
    bench-library) "$py" -m kernelcourse bench-library --size 4096 ;;
    lab04-1000)    "$py" -m kernelcourse run-lab 04 --size 1000 ;;
    lab0?)         "$py" -m kernelcourse run-lab "${1#lab}" ;;
    run-to-run)    "$py" labs/05-triton-gemm/run_to_run.py ;;
    autotune-noise) "$py" labs/05-triton-gemm/autotune_noise.py ;;
    launch-overhead) "$py" labs/05-triton-gemm/launch_overhead.py ;;
    simt-top)      "$py" labs/06-warp-tiling/sweep.py ;;
    profile)       "$py" -m kernelcourse profile --size 4096 ;;
    profile-fp16)  "$py" -m kernelcourse profile --size 4096 --ladder fp16 ;;
    profile-hopper) "$py" -m kernelcourse profile --size 4096 --ladder hopper ;;
    profile-lab00) "$py" -m kernelcourse profile --size 8192 --ladder lab00 ;;
    dynamic-shared) "$py" labs/07-tensor-cores/dynamic_shared.py ;;
    notebooks|notebooks:*) if ! "$py" -c 'import nbclient, ipykernel' 2>/dev/null; then
                     [ -d build/notebook-wheels ] || { echo "no nbclient and ipykernel here, and no"\
                       "build/notebook-wheels/ to install them from: make notebook-wheels (with PyPI), then carry it"; return 1; }
                     "$py" -m pip install -q --no-index --find-links build/notebook-wheels \
                       --target build/notebook-env nbclient nbformat ipykernel || return 1
                     # after this Python's own packages, so that none of them is replaced
                     export PYTHONPATH=$PYTHONPATH:$PWD/build/notebook-env
                   fi
                   labs=${1#notebooks}; IFS=, read -ra labs <<< "${labs#:}"
                   "$py" scripts/execute_notebooks.py --out results/notebooks "${labs[@]}" ;;
    grade)         subs=build/grade-subs-01; rm -rf "$subs" build/grade-01-jobs*
                   "$py" tests/grading/submissions.py 01 "$subs" || return 1
                   for jobs in ${GRADE_JOBS:-1 4}; do
                     began=$(date +%s)
                     # 60 s a test, not the exercise's 240 (sized for Triton's interpreter on
                     # a CPU): on an H200 the solution took 28 s for both files, timing included
                     GRADE_SEED=20261201 "$py" -m kernelcourse.grade "$subs" --exercise 01 \
                       --jobs $jobs --out build/grade-01-jobs$jobs --test-time-limit 60 || return 1
                     echo "JOBS=$jobs: $(( $(date +%s) - began )) s"
                   done
                   if [ "${GRADE_JOBS:-1 4}" = "1 4" ]; then
                     cmp build/grade-01-jobs1/grades.csv build/grade-01-jobs4/grades.csv &&
                       echo "JOBS=1 and JOBS=4 wrote the same grades.csv"
                   else echo "JOBS=${GRADE_JOBS} only: JOBS=1 and JOBS=4 not compared in this run"; fi ;;
    grade-04)      subs=build/grade-subs-04; rm -rf "$subs" build/grade-04
                   "$py" tests/grading/submissions.py 04 "$subs" || return 1
                   GRADE_SEED=20261202 "$py" -m kernelcourse.grade "$subs" --exercise 04 --jobs 1 \
                     --out build/grade-04 --test-time-limit 120 || return 1
                   "$py" -c 'import csv, sys; [print(r["student"], r["total"], "of", r["max"]) for r in csv.DictReader(open(sys.argv[1]))]' \
                     build/grade-04/grades.csv ;;
    grade-00)      "$py" -m pytest tests/test_exercise_00.py -k test_the_grader -rA -p no:cacheprovider ;;
    grade-sharded) subs=build/grade-subs-01-sharded; rm -rf "$subs" build/grade-01-sharded*
                   "$py" tests/grading/submissions.py 01 "$subs" || return 1
                   for how in jobs4 tasks3; do       # one JOBS=4 run, then 3 tasks (JOBS=4 each) here
                     began=$(date +%s)
                     GRADE_SEED=20261201 "$py" -m kernelcourse.grade "$subs" --exercise 01 --jobs 4 \
                       --out "build/grade-01-sharded-$how" --test-time-limit 60 \
                       $([ $how = tasks3 ] && echo --cluster local --tasks 3) || return 1
                     echo "$how: $(( $(date +%s) - began )) s"
                   done
                   "$py" -m kernelcourse.grade.compare build/grade-01-sharded-jobs4/grades.csv \
                     build/grade-01-sharded-tasks3/grades.csv --performance-aside ;;
    check-sanitize) dir=build/variants/reads_past_inputs     # what a student sees
                   "$py" tests/exercise_variants.py 01 reads_past_inputs "$dir" &&
                   "$py" -m kernelcourse.check 01 --folder "$dir" --backend cuda;
                   "$py" -m kernelcourse.check 01 --folder "$dir" --backend cuda --sanitize ;;
    *)             echo "unknown step $1"; return 2 ;;
  esac
}

for step in $steps; do
  echo "=== $step"
  start=$(date +%s)
  log=$logs/$(echo "$step" | tr '/:,' '___' | cut -c1-120).log   # (a long test-gpu: list cut)
  run_step "$step" > "$log" 2>&1
  rc=$?
  echo "rc=$rc $step ($(( $(date +%s) - start )) s)" | tee -a "$out/summary.txt"
  tail -n 30 "$log"
  if [ "$step" = grade ]; then          # the class's grades and both runs' summaries
    mkdir -p "results/grade-01-$device"
    cp build/grade-01-jobs4/grades.csv "results/grade-01-$device/grades.csv" 2>/dev/null
    cp build/grade-01-jobs4/roster.csv "results/grade-01-$device/roster.csv" 2>/dev/null
    rm -f "results/grade-01-$device"/summary-jobs*.json
    for jobs in ${GRADE_JOBS:-1 4}; do
      cp "build/grade-01-jobs$jobs/summary.json" "results/grade-01-$device/summary-jobs$jobs.json" 2>/dev/null
    done
    grep -E '^JOBS|same grades' "$log" > "results/grade-01-$device/runs.txt"
  fi
  if [ "$step" = grade-04 ]; then       # exercise 04's grades, each student's line of the log
    mkdir -p "results/grade-04-$device"
    cp build/grade-04/grades.csv "results/grade-04-$device/grades.csv" 2>/dev/null
    cp build/grade-04/students/solution/results.json "results/grade-04-$device/solution-results.json" 2>/dev/null
    { echo "scripts/gpu_checks.sh grade-04 on $device, $(date -u +%FT%TZ): GRADE_SEED=20261202, --jobs 1,"\
           "--test-time-limit 120"; grep -E '^  (probe|solution|stub|variant|cheat)|graded in' "$log"; } \
      > "results/grade-04-$device/runs.txt"
  fi
  if [ "$step" = grade-sharded ]; then  # the tasks' grades, where each ran, the comparison
    mkdir -p "results/grade-sharded-$device"
    for f in grades.csv tasks.csv summary.json; do
      cp "build/grade-01-sharded-tasks3/$f" "results/grade-sharded-$device/$f" 2>/dev/null
    done
    cp build/grade-01-sharded-jobs4/summary.json "results/grade-sharded-$device/summary-jobs4.json" 2>/dev/null
    { echo "scripts/gpu_checks.sh grade-sharded on $device, $(date -u +%FT%TZ): GRADE_SEED=20261201,"\
           "--test-time-limit 60, --jobs 4, then --cluster local --tasks 3"
      grep -E '^(jobs4|tasks3): |^  task |graded in|^build/|^  [^ ]+: ' "$log" | grep -vE '^  (probe|isolation): ' \
        | sed "s|$PWD/||g"                 # paths from the course's folder, not this machine's
    } > "results/grade-sharded-$device/runs.txt"
  fi
  if [ "$step" = grade-00 ]; then       # the test's verdict and the grader's lines
    { echo "scripts/gpu_checks.sh grade-00 on $device, $(date -u +%FT%TZ)"; sed "s|$PWD/||g; s|$PWD|.|g" "$log"; } \
      > "results/grade-00-$device.txt"
  fi
  if [ "$step" = check-sanitize ]; then
    { echo "make check EX=01 on exercise 01's reads_past_inputs variant (tests/exercise_variants.py),"\
           "plain then SANITIZE=1, on $device, $(date -u +%FT%TZ)"; cat "$log"; } > "results/check-sanitize-$device.txt"
  fi
  if [ "${step%%:*}" = test-gpu ]; then
    mkdir -p results
    summary=results/test-gpu-$device.txt
    [ "$step" = test-gpu ] && : > "$summary"           # the whole suite: a fresh summary
    { echo "make test-gpu${step#test-gpu}${GPU_TESTS_K:+ -k '$GPU_TESTS_K'} on $device, $(date -u +%FT%TZ), python $("$py" -V 2>&1 | cut -d' ' -f2),"\
           "torch $("$py" -c 'import torch; print(torch.__version__)'),"\
           "triton $("$py" -c 'import triton; print(triton.__version__)'),"\
           "cupy $("$py" -c 'import cupy; print(cupy.__version__)')"
      grep -E '^(PASSED|FAILED|ERROR|SKIPPED)|^=+ .*(passed|failed)' "$log"
    } >> "$summary"
  fi
  # After each step, one tarball in OUTPUT_DIR of every log so far and of the results/ files
  # this run wrote (a machine may return only a few files, and a call cut short still returns
  # what the finished steps made): logs/ and results/ inside it.
  mkdir -p "$logs/results"
  (cd results && find . -type f -newer "$logs/began" -exec cp --parents {} "$logs/results/" \;)
  tar czf "$out/gpu-run.tar.gz" -C "$logs" .
done
cat "$out/summary.txt"
