// Goodput from a run's attempts: time training over wall time, and what each interruption cost.
//
// For each interruption (attempt k ended, attempt k+1 resumed):
//   downtime = k+1's start - k's end (noticing, requeueing, placing, starting again)
//   rework   = the time attempt k spent on the steps k+1 had to do again, from the checkpoint
//              it resumed from (k+1's resumed_from_step) to k's last step; measured from the
//              progress points of attempt k when there are any, else prorated over k's steps
//   lost     = downtime + rework
// Time training = the attempts' running time less their rework; wall time = created to ended
// (or now). Pure functions of the API's JSON (snake_case, int64 as strings).

import { enumName, num, parseTime } from './dom.js';

export function computeGoodput(run, attempts, points = [], now = Date.now()) {
  const created = parseTime(run && run.created_at);
  const ended = parseTime(run && run.ended_at);
  const wallEnd = ended !== null ? ended : now;
  const wallSeconds = created !== null ? Math.max(0, (wallEnd - created) / 1000) : 0;

  const sorted = [...(attempts || [])].sort((a, b) => num(a.resumption_index) - num(b.resumption_index));
  const byAttempt = new Map();
  for (const p of points || []) {
    const r = num(p.resumption_index);
    if (!byAttempt.has(r)) byAttempt.set(r, []);
    byAttempt.get(r).push(p);
  }
  for (const list of byAttempt.values()) list.sort((a, b) => num(a.step) - num(b.step));

  let runningSeconds = 0;
  let reworkTotal = 0;
  let downtimeTotal = 0;
  const interruptions = [];
  sorted.forEach((a, i) => {
    const start = parseTime(a.started_at);
    const end = parseTime(a.ended_at);
    const stop = end !== null ? end : ended !== null ? ended : now;
    const seconds = start !== null ? Math.max(0, (stop - start) / 1000) : 0;
    runningSeconds += seconds;
    const next = sorted[i + 1];
    if (!next) return;
    const nextStart = parseTime(next.started_at);
    const resumeStep = num(next.resumed_from_step);
    const lastStep = num(a.last_step);
    const firstStep = num(a.resumed_from_step);
    const reworkSteps = Math.max(0, lastStep - resumeStep);
    let rework = 0;
    if (start !== null && seconds > 0 && reworkSteps > 0) {
      const pts = byAttempt.get(num(a.resumption_index)) || [];
      // When attempt k had reached the step k+1 resumed from.
      const reached = pts.find((p) => num(p.step) >= resumeStep);
      const reachedAt = reached ? parseTime(reached.time) : null;
      if (resumeStep <= firstStep) {
        rework = seconds; // nothing of it was kept
      } else if (reachedAt !== null && end !== null) {
        rework = Math.min(seconds, Math.max(0, (end - reachedAt) / 1000));
      } else if (lastStep > firstStep) {
        rework = seconds * Math.min(1, reworkSteps / (lastStep - firstStep));
      }
    } else if (start !== null && seconds > 0 && lastStep <= firstStep && resumeStep <= firstStep) {
      rework = seconds; // made no progress before it ended: all of it lost
    }
    const downtimeEnd = nextStart !== null ? nextStart : ended !== null ? ended : now;
    const downtime = end !== null ? Math.max(0, (downtimeEnd - end) / 1000) : 0;
    reworkTotal += rework;
    downtimeTotal += downtime;
    interruptions.push({
      resumption_index: num(a.resumption_index),
      next_resumption_index: num(next.resumption_index),
      cause: enumName(a.end_reason, 'ATTEMPT_END_REASON_') || 'UNSPECIFIED',
      detection: enumName(a.detection_method, 'DETECTION_METHOD_'),
      reason: a.reason || '',
      node: a.first_failed_node || '',
      ended_at: a.ended_at || null,
      restarted_at: next.started_at || null,
      last_step: lastStep,
      resumed_from_step: resumeStep,
      rework_steps: reworkSteps,
      downtime_seconds: downtime,
      rework_seconds: rework,
      lost_seconds: downtime + rework,
      restarting: nextStart === null,
    });
  });
  const trainingSeconds = Math.max(0, runningSeconds - reworkTotal);
  const firstStart = sorted.length ? parseTime(sorted[0].started_at) : null;
  return {
    wall_seconds: wallSeconds,
    running_seconds: runningSeconds,
    training_seconds: trainingSeconds,
    rework_seconds: reworkTotal,
    downtime_seconds: downtimeTotal,
    queued_seconds: created !== null && firstStart !== null ? Math.max(0, (firstStart - created) / 1000) : null,
    goodput: wallSeconds > 0 ? Math.min(1, trainingSeconds / wallSeconds) : null,
    interruptions,
  };
}
