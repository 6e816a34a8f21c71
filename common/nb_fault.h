/* nb_fault: named fault points that tests switch on through the environment
 * (NPUBENCH_FAULT=point[,point...]), for failures no test can cause on demand otherwise. */
#ifndef NB_FAULT_H
#define NB_FAULT_H

/* 1 when point is listed in NPUBENCH_FAULT. Points in use:
 *   result_store       the coordinator cannot store a result (disk full)
 *   disk_full          the coordinator's free-space check sees a full disk
 *   kill_after_commit  the coordinator dies (SIGKILL) after a result commits,
 *                      before it answers the worker
 *   kv_offset          the engine's decode writes K/V one cache slot late
 *   mlp_layer:N        the engine corrupts layer N's MLP weights (nb_fault_arg)
 *   kv_short           the engine's decode attends one KV position fewer (not its own)
 *   rope_decode        the engine's decode rotates q and k one position late
 *   final_norm         the engine negates every 4th final-norm weight */
int nb_fault(const char *point);

/* For a point listed with a number ("mlp_layer:7"): 1 and *value = 7; 0 when the point is
 * not listed; -1 when it is listed without a decimal number in int range after the ':'. */
int nb_fault_arg(const char *point, long *value);

#endif
