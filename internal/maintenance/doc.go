// Package maintenance is what keeps Sluice's work and data in shape in
// the background, apart from delivery itself:
//
//   - The Sweeper runs in every worker process, about once a second
//     across all of them. It replaces the job of a fan-out, dispatch or
//     bulk replay run that died as soon as its lease is free
//     (jobs.ReplaceDead; River's rescuer would wait an hour), queues the
//     dispatch of endpoints whose retries are due, and every few seconds
//     walks the endpoints with deliveries due for any a crash left without
//     a dispatch job. It guarantees that a dead run's work, and a due
//     delivery without a dispatch job, are taken up again within seconds,
//     whichever processes (River's leader included) have died.
//   - The RetentionWorker is a River periodic job, hourly on the leader.
//     It creates each week's partitions of events, deliveries and
//     attempts ahead of time and drops a week once it has expired, moving
//     out first what must outlive it; its cost does not grow with the
//     rows a week holds, and delivery never waits on it for more than a
//     few milliseconds (PartitionLockTimeout).
package maintenance
