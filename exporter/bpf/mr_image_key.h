// The MR probes' image key (probes/mr.h, struct mr_proc_key) and sys::ImageKey, converted in
// this one place: every struct of the probes that names an image (a region's key and its
// leader start, a stack sample, an exit event) goes through mr_proc_key, so a field added to
// the image's identity has one conversion to follow.
#pragma once

#include "mr.h"
#include "sys/image_key.h"

namespace rdmascope {

inline sys::ImageKey ImageKeyOf(const mr_proc_key& key) {
  return {.tgid = key.tgid, .exec_id = key.exec_id, .start_ns = key.start_ns};
}

inline mr_proc_key ProcKeyOf(const sys::ImageKey& image) {
  return {.tgid = image.tgid, .exec_id = image.exec_id, .start_ns = image.start_ns};
}

// A region's image: its key names the process and exec generation, the region the leader's
// start (mr_region.proc_start_ns).
inline sys::ImageKey ImageKeyOf(const mr_region_key& key, const mr_region& region) {
  return ImageKeyOf(
      mr_proc_key{.tgid = key.tgid, .exec_id = key.exec_id, .start_ns = region.proc_start_ns});
}

inline sys::ImageKey ImageKeyOf(const mr_stack_sample& sample) {
  return ImageKeyOf(mr_proc_key{
      .tgid = sample.tgid, .exec_id = sample.exec_id, .start_ns = sample.proc_start_ns});
}

inline sys::ImageKey ImageKeyOf(const mr_exit_event& event) {
  return ImageKeyOf(
      mr_proc_key{.tgid = event.tgid, .exec_id = event.exec_id, .start_ns = event.start_ns});
}

inline mr_site_key SiteKeyOf(const sys::ImageKey& image, uint64_t site) {
  const mr_proc_key key = ProcKeyOf(image);
  return {.tgid = key.tgid, .exec_id = key.exec_id, .start_ns = key.start_ns, .site = site};
}

}  // namespace rdmascope
