/* nb_fault: named fault points that tests switch on through the environment
 * (NPUBENCH_FAULT=point[,point...]), for failures no test can cause on demand otherwise. */
#ifndef NB_FAULT_H
#define NB_FAULT_H

/* 1 when point is listed in NPUBENCH_FAULT. Points in use:
 *   result_store       the coordinator cannot store a result (disk full)
 *   disk_full          the coordinator's free-space check sees a full disk
 *   kill_after_commit  the coordinator dies (SIGKILL) after a result commits,
 *                      before it answers the worker */
int nb_fault(const char *point);

#endif
