"""The instructor's grader: folders of submissions in, grades.csv and Gradescope results.json out.

`make grade SUBMISSIONS=dir/` (python -m kernelcourse.grade) runs it; GRADING.md is the
instructor's manual. One module per job:

  spec.py       what is graded: an exercise's grading.py (tests, points) and spec.py (files,
                limits), loaded
  inputs.py     the secret seed of a run, the inputs drawn from it, the float64 references
  intake.py     a student's folder, read: the files found without following a link, and copied
  sandbox.py    one child process per submission: another user, a scratch folder, an empty
                environment, time and output limits, a private pipe for what comes back
  channel.py    that pipe's framing (a JSON header, then the bytes of one array), and every
                message validated against what the parent asked for
  child.py      the child's side: load the submission, run it on the inputs, send the outputs
  audit.py      the audit hook in the child: refuses exec, imports, writes, processes the
                submission asks for
  static/       the static checks: no library GEMM in a Triton file, no escape hatch in a .cu
  driver.py     one job through a submission's children: a fresh child after one that ends
  leftovers.py  the processes a submission leaves behind: found, and killed
  judge.py      the parent's side: every output judged here, by verify()'s rules, into points
  perf.py       the timing of a correct kernel beside the course's reference, and the curve
  report.py     grades.csv, Gradescope's results.json, and the schema both are checked against
  runner.py     one submission through all of the above, and the run they share
  classroom.py  a folder of submissions with JOBS workers, a row per student whatever happens
  cluster.py    a class as an array of tasks (CLUSTER=slurm or local): plan, submit, wait, resume
  slurm.py      Slurm's sbatch --array, squeue and scancel, and nothing more
  local.py      the same tasks as processes on this machine, one per GPU at a time
  task.py       one task: its share of the class, graded as on one machine, and its outcome
  merge.py      the tasks' rows into one grades.csv, the students' results.json and tasks.csv
  compare.py    two grades.csv of one class compared (performance points aside, if asked)
  autograder.py the zip Gradescope runs (make autograder EX=NN)

The child never reports a verdict: it sends arrays and values, and the parent judges them.
"""
