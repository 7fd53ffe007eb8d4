// Which process holds each user RDMA object of a restrack dump.
//
// restrack records the *thread* that created an object (res->task = current, restrack.c
// rdma_restrack_attach_task), and nldev.c fill_res_name_pid dumps task_pid_vnr() of it: a
// thread id, or no pid at all once that thread has exited, although the object lives on in
// its process until the process closes its uverbs file. Libraries register memory and
// create queues from threads of their own (NCCL's proxy, UCX's async thread, a data loader's
// workers), so neither the pid as dumped nor its absence says who holds the object.
// Objects name their parents (nldev.c: MR, QP and SRQ the PD, by pdn; PD and CQ the
// context, by ctxn), so an object without a pid takes the process of its nearest parent
// that has one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "sys/rdma_netlink.h"

namespace rdmascope::sys {

// The thread group (process) of a task: /proc/PID/status "Tgid:", which /proc lists for
// every thread id too. nullopt when the task is gone or the file is malformed.
std::optional<uint32_t> ThreadGroupOf(const std::filesystem::path& procfs, uint32_t pid);

// tid -> process; nullopt when the thread is gone. An empty function: the identity.
using ThreadGroupLookup = std::function<std::optional<uint32_t>(uint32_t)>;

// Rewrites each user entry's `pid` to its process: the thread group of the dumped pid, else
// (no pid, or the thread exited since the dump) that of its PD's or context's owner on the
// same device, marked `pid_from_parent`; else the pid as dumped, if any. Entries still
// without one keep no pid (the whole process is exiting, or its parents were not dumped).
// Kernel entries are left as they are.
void ResolveOwners(std::vector<RdmaDeviceResources>& devices, const ThreadGroupLookup& tgid_of);

}  // namespace rdmascope::sys
