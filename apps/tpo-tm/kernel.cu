// tpo-tm: dynamic task management with task queues under spin-lock mutexes (written from scratch
// for gpuwmm; it reimplements the communication idiom of the task-management framework of Tzeng,
// Patney and Owens, not their code).
//
// Idiom: every block owns one task queue (an array with a head and a tail index), protected by its
// own spin-lock (atomicCAS(lock, 0, 1) to take, atomicExch(lock, 0) to give back). A block works
// as a unit: thread 0 takes a task from its own queue, or, when that is empty, from the other
// queues in turn (work stealing); the whole block executes it (every thread writes one word of
// the task's output); thread 0 then adds the task's children, one to its own queue and one to the
// next block's (work donation), and counts the task as done. Tasks spawn tasks: task t has the
// children 2t+1 and 2t+2 (those below `tasks`), so starting from task 0 exactly `tasks` tasks
// exist. A block stops when the done counter reaches `tasks`, or after `max_idle` consecutive
// attempts that found every queue empty (a run that lost a task ends instead of hanging; the
// check then reports the task that never ran).
//
// Deliberately NO fences, as in the original: head, tail and the queue items are plain loads and
// stores inside the critical sections, and the lock's atomics are relaxed. On a weak memory model
// the next holder of a lock may read a stale head (two blocks take the same task), a stale tail
// (an added task overwrites another) or a stale item.
//
// Post-condition (meta-data recorded during the run, as the paper did): every task 0..tasks-1
// was executed exactly once (executed[t] == 1), its output words are right, the done counter is
// `tasks`, and no block gave up, overflowed a queue or took an invalid task id. tm_check is that
// post-condition as a check kernel (app.toml names it).
//
// Launch: tm_init<<<1, 1>>> (puts task 0 into queue 0), then tm_run<<<queues, threads>>> (one
// queue per block). Buffers: items[queues * capacity], head/tail/lock
// [queues], done[1], executed[tasks], output[tasks * threads], errors[3], all zero beforehand.

#define TM_NONE 0xffffffffu  // no task taken this round
#define TM_EXIT 0xfffffffeu  // the block stops

// Error counters, errors[TM_ERR_*].
#define TM_ERR_OVERFLOW 0  // a queue was full
#define TM_ERR_BAD_TASK 1  // a task id out of range was taken
#define TM_ERR_GAVE_UP 2   // a block stopped after max_idle empty rounds

__device__ unsigned task_payload(unsigned task, unsigned thread)
{
    return task * 2654435761u + thread * 40503u + 1u;
}

extern "C" __global__ void tm_init(unsigned *items, unsigned *tail)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        items[0] = 0;  // task 0, the root, in queue 0
        tail[0] = 1;
    }
}

// The queue operations are written out in the kernel body, not in helper functions: fence sites
// are source lines of the kernel (inlined code counts as the line of its call), so every access
// of the idiom gets a line of its own.
extern "C" __global__ void tm_run(unsigned *items, unsigned *head, unsigned *tail, unsigned *lock,
                                  unsigned *done, unsigned *executed, unsigned *output,
                                  unsigned *errors, unsigned tasks, unsigned capacity,
                                  unsigned max_idle)
{
    __shared__ unsigned s_task;
    const unsigned queues = gridDim.x;
    const unsigned home = blockIdx.x;
    unsigned idle = 0;  // thread 0: consecutive rounds that found every queue empty
    for (;;) {
        if (threadIdx.x == 0) {
            // Take the oldest task of the own queue, else of the next non-empty one.
            unsigned task = TM_NONE;
            for (unsigned k = 0; k < queues && task == TM_NONE; ++k) {
                const unsigned q = (home + k) % queues;
                while (atomicCAS(&lock[q], 0u, 1u) != 0u) {
                    // spin until the lock is ours
                }
                const unsigned h = head[q];
                if (h < tail[q]) {
                    task = items[q * capacity + h];
                    head[q] = h + 1;
                }
                atomicExch(&lock[q], 0u);  // unlock, with no __threadfence() before it
            }
            if (task != TM_NONE) {
                idle = 0;
            } else if (*(volatile unsigned *)done >= tasks) {
                task = TM_EXIT;
            } else if (++idle >= max_idle) {
                atomicAdd(&errors[TM_ERR_GAVE_UP], 1u);
                task = TM_EXIT;
            }
            s_task = task;
        }
        __syncthreads();
        const unsigned task = s_task;
        if (task == TM_EXIT) {
            break;
        }
        if (task < tasks) {
            output[task * blockDim.x + threadIdx.x] = task_payload(task, threadIdx.x);
        }
        __syncthreads();
        if (threadIdx.x == 0 && task != TM_NONE) {
            if (task >= tasks) {
                atomicAdd(&errors[TM_ERR_BAD_TASK], 1u);
            } else {
                atomicAdd(&executed[task], 1u);  // meta-data for the post-condition
                // Children 2t+1 to the own queue, 2t+2 to the next block's (work donation).
                for (unsigned c = 1; c <= 2; ++c) {
                    const unsigned child = 2 * task + c;
                    const unsigned q = (home + c - 1) % queues;
                    if (child < tasks) {
                        while (atomicCAS(&lock[q], 0u, 1u) != 0u) {
                            // spin until the lock is ours
                        }
                        const unsigned t = tail[q];
                        if (t < capacity) {
                            items[q * capacity + t] = child;
                            tail[q] = t + 1;
                        } else {
                            atomicAdd(&errors[TM_ERR_OVERFLOW], 1u);
                        }
                        atomicExch(&lock[q], 0u);  // unlock, with no __threadfence() before it
                    }
                }
                atomicAdd(done, 1u);
            }
        }
    }
}

// status[0]: 0 = pass, else the code of the first violation; status[1..3] say where.
extern "C" __global__ void tm_check(const unsigned *executed, const unsigned *output,
                                    const unsigned *done, const unsigned *errors, unsigned tasks,
                                    unsigned threads, unsigned *status)
{
    for (unsigned t = 0; t < tasks; ++t) {
        if (executed[t] != 1) {
            status[0] = 1;
            status[1] = t;
            status[2] = executed[t];
            return;
        }
    }
    for (unsigned t = 0; t < tasks; ++t) {
        for (unsigned i = 0; i < threads; ++i) {
            if (output[t * threads + i] != task_payload(t, i)) {
                status[0] = 2;
                status[1] = t;
                status[2] = i;
                status[3] = output[t * threads + i];
                return;
            }
        }
    }
    if (*done != tasks) {
        status[0] = 3;
        status[1] = *done;
        return;
    }
    for (unsigned e = 0; e < 3; ++e) {
        if (errors[e] != 0) {
            status[0] = 4 + e;
            status[1] = errors[e];
            return;
        }
    }
    status[0] = 0;
}
