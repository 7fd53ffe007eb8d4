#!/usr/bin/env python3
"""Generates the Grafana dashboards (dashboards/*.json) from the definitions below, so that
every dashboard shares its variables, units and conventions. Run it after editing; the test
tier checks that the JSON files are what this script produces (tests/rules/check_dashboards.py)
and that every query uses metrics the exporter serves.

Usage: generate.py [--selector MATCHERS] [--cluster-label NAME] [OUTPUT_DIR]
(default: the directory of this script). As for rules/generate.py, a site can add label
matchers to every query (--selector 'job="rdmascope"') and name its cluster label
(--cluster-label); the Grafana variable keeps the name `cluster`."""

import argparse
import json
import os
import re
import sys

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Every series selector filters by cluster and host, so that one data source can hold many
# clusters. `cluster` is the target label docs/deployment.md sets and the fleet rules roll up by.
# configure() changes them for a site (--selector, --cluster-label).
CLUSTER_LABEL = "cluster"
SITE_MATCHERS = ""
SEL = 'cluster=~"$cluster",instance=~"$instance"'


def configure(selector="", cluster_label="cluster"):
    global CLUSTER_LABEL, SITE_MATCHERS, SEL
    CLUSTER_LABEL, SITE_MATCHERS = cluster_label, selector
    SEL = f'{cluster_label}=~"$cluster",instance=~"$instance"' + (f",{selector}" if selector else "")


def variables(*extra):
    def query_variable(name, label, query, **extra):
        return {"name": name, "type": "query", "label": label, "datasource": DATASOURCE,
                "query": {"query": query, "refId": name}, "definition": query,
                "multi": True, "includeAll": True, "refresh": 2, "sort": 1, **extra}

    site = "{" + SITE_MATCHERS + "}" if SITE_MATCHERS else ""
    base = [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source"},
        # All is ".*", not the list of clusters found: it also matches targets without a
        # cluster label (a single host), which a list of values would leave out.
        query_variable("cluster", "Cluster",
                       f"label_values(rdmascope_build_info{site}, {CLUSTER_LABEL})",
                       allValue=".*"),
        query_variable("instance", "Host",
                       f'label_values(rdmascope_build_info{{{CLUSTER_LABEL}=~"$cluster"'
                       f'{"," + SITE_MATCHERS if SITE_MATCHERS else ""}}}, instance)'),
    ]
    for entry in extra:
        if isinstance(entry, dict):
            base.append(entry)  # built by the dashboard (workload_variables)
        elif len(entry) == 4:  # (name, label, query, allValue)
            base.append(query_variable(*entry[:3], allValue=entry[3]))
        else:
            base.append(query_variable(*entry))
    return {"list": base}


# Which workload's processes the per-process panels show: a label of
# rdma_process_workload_info (the workload collector's series, one per exported pid) and its
# values. All is ".*", which also matches processes whose series lacks that label; a process
# without a workload series at all (the workload collector disabled) is not shown.
WORKLOAD_LABELS = ("pod_uid", "slurm_job_id", "systemd_unit", "container_id")


def workload_variables():
    return [
        {"name": "workload_label", "type": "custom", "label": "Workload by",
         "query": ",".join(WORKLOAD_LABELS), "multi": False, "includeAll": False,
         "current": {"text": WORKLOAD_LABELS[0], "value": WORKLOAD_LABELS[0]},
         "options": [{"text": label, "value": label, "selected": i == 0}
                     for i, label in enumerate(WORKLOAD_LABELS)]},
        ("workload", "Workload",
         f"label_values(rdma_process_workload_info{{{SEL}}}, $workload_label)", ".*"),
    ]


def of_workload(expr):
    """EXPR (per process) restricted to the processes of the selected workloads."""
    return (f"({expr}) and on ({CLUSTER_LABEL}, instance, pid) "
            f'rdma_process_workload_info{{{SEL},$workload_label=~"$workload"}}')


def panel(kind, title, description, targets, unit="short", width=12, height=8, **extra):
    body = {
        "type": kind, "title": title, "description": description, "datasource": DATASOURCE,
        "gridPos": {"w": width, "h": height},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend,
                     "datasource": DATASOURCE, **({"format": "table", "instant": True}
                                                   if kind == "table" else {})}
                    for i, (expr, legend) in enumerate(targets)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {},
    }
    body.update(extra)
    return body


def timeseries(title, description, targets, unit="short", **extra):
    return panel("timeseries", title, description, targets, unit, **extra)


def stat(title, description, expr, unit="short", width=6):
    return panel("stat", title, description, [(expr, "")], unit, width=width, height=4)


def table(title, description, targets, unit="short", width=24):
    return panel("table", title, description, targets, unit, width=width)


def layout(panels):
    x = y = row_height = 0
    for i, p in enumerate(panels):
        w, h = p["gridPos"]["w"], p["gridPos"]["h"]
        if x + w > 24:
            x, y, row_height = 0, y + row_height, 0
        p["gridPos"].update({"x": x, "y": y})
        p["id"] = i + 1
        x, row_height = x + w, max(row_height, h)
    return panels


def dashboard(uid, title, description, panels, extra_variables=()):
    return {
        "uid": uid, "title": title, "description": description,
        "tags": ["rdma", "rdmascope"], "timezone": "browser", "schemaVersion": 37,
        "editable": True, "refresh": "30s", "time": {"from": "now-6h", "to": "now"},
        "templating": variables(*extra_variables), "panels": layout(panels),
        "annotations": {"list": []},
        "links": [{"title": "rdmascope dashboards", "type": "dashboards", "tags": ["rdmascope"],
                   "asDropdown": True}],
    }


def host_overview():
    return dashboard("rdmascope-host", "RDMA host overview",
                     "One screen per host: ports, traffic, pinned memory, queues at risk, "
                     "firing alerts and the exporter's own health.", [
        stat("Active ports", "RDMA ports in state ACTIVE.",
             f"count(rdma_port_state{{{SEL}}} == 4)"),
        stat("Ports not active", "RDMA ports not in state ACTIVE (RdmaPortDown).",
             f"count(rdma_port_state{{{SEL}}} != 4) or vector(0)"),
        stat("Pinned memory", "Memory pinned by RDMA processes (VmPin).",
             f"sum(rdma_process_pinned_bytes{{{SEL}}})", "bytes"),
        stat("Firing RDMA alerts", "Alerts of rules/rdmascope.rules.yml firing for these hosts.",
             f'count(ALERTS{{alertstate="firing",alertname=~"Rdma.*",{SEL}}}) or vector(0)'),
        timeseries("Port receive throughput", "Data received per port (IBA port counters).",
                   [(f"rate(rdma_port_data_received_bytes_total{{{SEL}}}[$__rate_interval])",
                     "{{instance}} {{device}}/{{port}}")], "Bps"),
        timeseries("Port transmit throughput", "Data transmitted per port.",
                   [(f"rate(rdma_port_data_transmitted_bytes_total{{{SEL}}}[$__rate_interval])",
                     "{{instance}} {{device}}/{{port}}")], "Bps"),
        timeseries("Outstanding memory registrations by command",
                   "Bytes registered and not deregistered (eBPF); steady growth is a leak.",
                   [(f"sum by (instance, comm) (rdma_mr_outstanding_bytes{{{SEL}}})",
                     "{{instance}} {{comm}}")], "bytes"),
        timeseries("CQ capacity over feeding depth (lowest)",
                   "For each host, the CQ with the least headroom: below 1.5 risks overflow "
                   "(RdmaCqUndersized).",
                   [(f"min by (instance) (rdma_cq_capacity_entries{{{SEL}}} / "
                     f"(rdma_cq_feeding_wrs{{{SEL}}} > 0))", "{{instance}}")], "short"),
        timeseries("Threads off their NIC's NUMA node", "Share of each RDMA process's threads "
                   "that last ran on another node than its device (RdmaProcessOffNicNumaNode).",
                   [(f"rdma_process_remote_numa_thread_ratio{{{SEL}}}",
                     "{{instance}} {{comm}} {{pid}} {{device}}")], "percentunit"),
        table("Collectors", "Each rdmascope collector: 1 succeeded at the last scrape.",
              [(f"rdmascope_collector_success{{{SEL}}}", ""),
               (f"rdmascope_collector_no_data{{{SEL}}}", ""),
               (f"rdmascope_probe_attached{{{SEL}}}", "")]),
    ])


def nic_roce():
    dev = 'device=~"$netdev"'
    return dashboard("rdmascope-nic", "RDMA NIC and RoCE health",
                     "Link errors, PFC pause, ECN/CNP congestion, retransmissions, receive "
                     "starvation and the NIC configuration behind RoCE.", [
        timeseries("CRC/FCS errors", "Frames received with a bad checksum (RdmaCrcErrors).",
                   [(f"rate(rdma_netdev_crc_errors_total{{{SEL},{dev}}}[$__rate_interval])",
                     "{{instance}} {{device}}")], "pps"),
        timeseries("Symbol errors", "Physical-layer errors, netdev and IB port (RdmaSymbolErrors).",
                   [(f"rate(rdma_netdev_symbol_errors_total{{{SEL},{dev}}}[$__rate_interval])",
                     "{{instance}} {{device}}"),
                    (f"rate(rdma_port_symbol_errors_total{{{SEL}}}[$__rate_interval])",
                     "{{instance}} {{device}}/{{port}}")], "pps"),
        timeseries("PFC pause frames per priority", "Pause frames by direction and priority; "
                   "RoCE usually runs on priority 3 (RdmaHeavyPauseOnRocePriority).",
                   [(f"rate(rdma_netdev_pause_frames_total{{{SEL},{dev}}}[$__rate_interval])",
                     "{{instance}} {{device}} {{direction}} prio {{priority}}")], "pps"),
        timeseries("Pause storms", "Pause-storm events reported by the NIC (RdmaPauseStorm).",
                   [(f"increase(rdma_netdev_pause_storm_events_total{{{SEL},{dev}}}[$__rate_interval])",
                     "{{instance}} {{device}} {{level}}")], "short"),
        timeseries("ECN / CNP", "Congestion notifications per port (RdmaCongestionNotifications).",
                   [(f"rdma:port_congestion_notifications:rate5m{{{SEL}}}",
                     "{{instance}} {{device}}/{{port}}")], "ops"),
        timeseries("Retransmissions", "ACK timeouts and sequence errors (RdmaRetransmissions).",
                   [(f"rdma:port_retransmissions:rate5m{{{SEL}}}",
                     "{{instance}} {{device}}/{{port}}")], "ops"),
        timeseries("Receive starvation", "Messages that found no receive posted on this host: "
                   "mlx5 out_of_buffer, rxe RNR NAKs sent (RdmaReceiveStarvation).",
                   [(f"rdma:port_receive_starvation:rate5m{{{SEL}}}",
                     "{{instance}} {{device}}/{{port}}")], "ops"),
        timeseries("Peer receive starvation", "RNR NAKs received: the peers this port sends "
                   "to had no receive posted; the fix is on them (RdmaPeerReceiveStarvation).",
                   [(f"rdma:port_peer_receive_starvation:rate5m{{{SEL}}}",
                     "{{instance}} {{device}}/{{port}}")], "ops"),
        timeseries("Port state", "1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE (RdmaPortDown, "
                   "RdmaLinkFlapping).",
                   [(f"rdma_port_state{{{SEL}}}", "{{instance}} {{device}}/{{port}}")], "short"),
        table("MTU", "Netdev MTU (RoCE needs about 4200) and the RDMA port's active and maximum "
              "MTU (RdmaNetdevMtuTooSmallForRoce, RdmaActiveMtuBelowMax).",
              [(f"rdma_netdev_mtu_bytes{{{SEL},{dev}}}", ""),
               (f"rdma_port_active_mtu_bytes{{{SEL}}}", ""),
               (f"rdma_port_max_mtu_bytes{{{SEL}}}", "")], "bytes", width=12),
        table("PFC and interrupt coalescing", "PFC per priority (RdmaPfcNotOnRocePriority) and "
              "rx/tx coalescing (RdmaInterruptCoalescingDisabled).",
              [(f"rdma_netdev_pfc_enabled{{{SEL},{dev}}}", ""),
               (f"rdma_netdev_coalesce_usecs{{{SEL},{dev}}}", ""),
               (f"rdma_netdev_coalesce_adaptive{{{SEL},{dev}}}", "")], "short", width=12),
    ], [("netdev", "Netdev", f'label_values(rdma_netdev_info{{{SEL}}}, device)')])


def memory_registrations():
    c = 'comm=~"$comm"'
    return dashboard("rdmascope-mr", "RDMA memory registrations",
                     "Registrations per process from eBPF uprobes on libibverbs: leaks, leak "
                     "suspects, pinned memory against its limits, churn and alignment.", [
        timeseries("Outstanding bytes", "Registered and not deregistered (RdmaMrLeak).",
                   [(of_workload(f"rdma_mr_outstanding_bytes{{{SEL},{c}}}"), "{{instance}} {{comm}} {{pid}}")],
                   "bytes"),
        timeseries("Leak suspects", "Bytes of regions older than --collector.mr.leak-age; the "
                   "call sites are at /debug/mr/stacks on the exporter.",
                   [(of_workload(f"rdma_mr_leak_suspect_bytes{{{SEL},{c}}}"), "{{instance}} {{comm}} {{pid}}")],
                   "bytes"),
        timeseries("Pinned memory and its limit", "VmPin against RLIMIT_MEMLOCK "
                   "(RdmaPinnedMemoryHitsLockedLimitIn48h).",
                   [(of_workload(f"rdma_process_pinned_bytes{{{SEL},{c}}}"), "{{comm}} {{pid}} pinned"),
                    (of_workload(f"rdma_process_locked_memory_limit_bytes{{{SEL},{c}}}"), "{{comm}} {{pid}} limit")],
                   "bytes"),
        timeseries("Pinned memory in 48 hours", "Linear prediction from the last 6 hours, "
                   "against 90% of the host's memory (RdmaPinnedMemoryExhaustsHostIn48h).",
                   [(f"sum by (instance) (rdma:process_pinned_bytes:predict48h{{{SEL}}})",
                     "{{instance}} predicted"),
                    (f"0.9 * rdma_host_memory_bytes{{{SEL}}}", "{{instance}} 90% of memory")],
                   "bytes"),
        timeseries("Registrations and deregistrations", "Per second; both high is churn "
                   "(RdmaMrRegistrationChurn).",
                   [(of_workload(f"rate(rdma_mr_registrations_total{{{SEL},{c}}}[$__rate_interval])"),
                     "{{comm}} {{pid}} reg"),
                    (of_workload(f"rate(rdma_mr_deregistrations_total{{{SEL},{c}}}[$__rate_interval])"),
                     "{{comm}} {{pid}} dereg"),
                    (of_workload(f"rate(rdma_mr_registration_failures_total{{{SEL},{c}}}[$__rate_interval])"),
                     "{{comm}} {{pid}} failed")], "ops"),
        timeseries("Registration latency (p50, p99)", "Time inside ibv_reg_mr.",
                   [(f"histogram_quantile(0.5, sum by (le, comm) (rate(rdma_mr_registration_duration_seconds_bucket{{{SEL},{c}}}[$__rate_interval])))",
                     "{{comm}} p50"),
                    (f"histogram_quantile(0.99, sum by (le, comm) (rate(rdma_mr_registration_duration_seconds_bucket{{{SEL},{c}}}[$__rate_interval])))",
                     "{{comm}} p99")], "s"),
        timeseries("Registration sizes (p50, p99)", "Lengths registered.",
                   [(f"histogram_quantile(0.5, sum by (le, comm) (rate(rdma_mr_registration_size_bytes_bucket{{{SEL},{c}}}[$__rate_interval])))",
                     "{{comm}} p50"),
                    (f"histogram_quantile(0.99, sum by (le, comm) (rate(rdma_mr_registration_size_bytes_bucket{{{SEL},{c}}}[$__rate_interval])))",
                     "{{comm}} p99")], "bytes"),
        timeseries("Not on 2 MiB pages", "Share of registered bytes not 2 MiB-aligned "
                   "(RdmaMrNotOnHugePages).",
                   [(f"sum by (comm) (rate(rdma_mr_not_hugepage_aligned_bytes_total{{{SEL},{c}}}[1h])) / "
                     f"sum by (comm) (rate(rdma_mr_registration_size_bytes_sum{{{SEL},{c}}}[1h]))",
                     "{{comm}}")], "percentunit"),
        timeseries("Released at exit", "Regions still registered when their process exited.",
                   [(f"increase(rdma_mr_exit_released_bytes_total{{{SEL},{c}}}[$__rate_interval])",
                     "{{comm}}")], "bytes"),
        timeseries("Events lost", "Not tracked because a BPF map was full (RdmascopeEventsLost).",
                   [(f"increase(rdma_mr_lost_total{{{SEL}}}[$__rate_interval])", "{{instance}} {{reason}}")],
                   "short"),
    ], [("comm", "Command", f'label_values(rdma_process_pinned_bytes{{{SEL}}}, comm)'),
        *workload_variables()])


def queues():
    return dashboard("rdmascope-queues", "RDMA queues: CQ, SRQ, QP",
                     "Completion and shared receive queues: sizing against the work feeding "
                     "them, occupancy (preload library, mlx5 hardware state), async events, and "
                     "the objects each process holds.", [
        table("CQ sizing", "Capacity, feeding depth and their ratio per CQ: below 1.5 risks "
              "overflow (RdmaCqUndersized).",
              [(of_workload(f"rdma_cq_capacity_entries{{{SEL}}}"), ""),
               (of_workload(f"rdma_cq_feeding_wrs{{{SEL}}}"), ""),
               (of_workload(f"rdma_cq_capacity_entries{{{SEL}}} / (rdma_cq_feeding_wrs{{{SEL}}} > 0)"), "")]),
        timeseries("CQ fill (preload library)", "Completions expected and not yet polled, over "
                   "capacity (RdmaCqNearFull).",
                   [(of_workload(f"rdma_cq_outstanding_entries{{{SEL}}} / rdma_cq_capacity_entries{{{SEL}}}"),
                     "{{comm}} {{pid}} cq {{cq}}")], "percentunit"),
        timeseries("CQ fill (mlx5 hardware)", "The device's producer minus consumer counter, "
                   "over capacity.",
                   [(of_workload(f"rdma_cq_hardware_occupancy_entries{{{SEL}}} / rdma_cq_hardware_capacity_entries{{{SEL}}}"),
                     "{{comm}} {{pid}} cqn {{cqn}}")], "percentunit"),
        timeseries("Poll batch fullness", "Completions returned over entries asked: near 1 the "
                   "poller falls behind.",
                   [(of_workload(f"rate(rdma_cq_polled_completions_total{{{SEL}}}[$__rate_interval]) / "
                     f"rate(rdma_cq_poll_requested_entries_total{{{SEL}}}[$__rate_interval])"),
                     "{{comm}} {{pid}} cq {{cq}}")], "percentunit"),
        timeseries("SRQ fill against its limit", "Receives posted and not consumed (preload "
                   "library), and the armed limit (RdmaSrqBelowLimit).",
                   [(of_workload(f"rdma_srq_posted_wrs{{{SEL}}}"), "{{comm}} {{pid}} srq {{srq}} posted"),
                    (of_workload(f"rdma_srq_limit_wrs{{{SEL}}}"), "{{comm}} {{pid}} srq {{srq}} limit")], "short"),
        timeseries("Asynchronous events", "Events applications receive (CQ_ERR, "
                   "SRQ_LIMIT_REACHED, QP_FATAL, PORT_ERR...).",
                   [(of_workload(f"increase(rdma_async_events_total{{{SEL}}}[$__rate_interval]) > 0"),
                     "{{comm}} {{pid}} {{event}}")], "short"),
        timeseries("QPs by type and state", "From the kernel's resource tracking.",
                   [(f"sum by (instance, type, state) (rdma_process_qps{{{SEL}}})",
                     "{{instance}} {{type}} {{state}}")], "short"),
        table("Objects per process", "PD, CQ, QP, MR, SRQ, context and CM ids each process "
              "holds (RDMA netlink).",
              [(of_workload(f"rdma_process_resources{{{SEL}}}"), "")]),
    ], workload_variables())


def cpu_memory():
    return dashboard("rdmascope-cpu", "CPU and memory controllers",
                     "Is it the NIC or the host? Instructions per cycle, front-end stalls, LLC "
                     "misses per NUMA node, and DRAM traffic per socket.", [
        timeseries("Instructions per cycle", "instructions / cycles per NUMA node.",
                   [(f'sum by (instance, node) (rate(rdma_perf_events_total{{event="instructions",{SEL}}}[$__rate_interval])) / '
                     f'sum by (instance, node) (rate(rdma_perf_events_total{{event="cycles",{SEL}}}[$__rate_interval]))',
                     "{{instance}} node {{node}}")], "short"),
        timeseries("Front-end stalls", "Share of cycles the front end stalled.",
                   [(f'sum by (instance, node) (rate(rdma_perf_events_total{{event="stalled-cycles-frontend",{SEL}}}[$__rate_interval])) / '
                     f'sum by (instance, node) (rate(rdma_perf_events_total{{event="cycles",{SEL}}}[$__rate_interval]))',
                     "{{instance}} node {{node}}")], "percentunit"),
        timeseries("LLC load miss ratio", "LLC-load-misses / LLC-loads per node.",
                   [(f'sum by (instance, node) (rate(rdma_perf_events_total{{event="LLC-load-misses",{SEL}}}[$__rate_interval])) / '
                     f'sum by (instance, node) (rate(rdma_perf_events_total{{event="LLC-loads",{SEL}}}[$__rate_interval]))',
                     "{{instance}} node {{node}}")], "percentunit"),
        timeseries("Memory controller traffic", "DRAM reads and writes per socket "
                   "(RdmaMemoryControllerSaturated).",
                   [(f"rate(rdma_memory_controller_read_bytes_total{{{SEL}}}[$__rate_interval])",
                     "{{instance}} socket {{socket}} read"),
                    (f"rate(rdma_memory_controller_write_bytes_total{{{SEL}}}[$__rate_interval])",
                     "{{instance}} socket {{socket}} write")], "Bps"),
        timeseries("Multiplexing", "Share of time each event was on a counter; below 1 the "
                   "counts are estimates.",
                   [(f"rdma_perf_event_running_ratio{{{SEL}}}", "{{instance}} {{event}} node {{node}}")],
                   "percentunit"),
        table("Events", "Configured perf events and whether this host can count them.",
              [(f"rdma_perf_event_supported{{{SEL}}}", "")], width=12),
    ])


def fleet():
    firing = f'alertstate="firing",{SEL}'
    drift = f'alertname=~"RdmaFleet.*",{firing}'
    return dashboard("rdmascope-fleet", "RDMA fleet drift",
                     "Hosts whose settings differ from their peers' (the same NIC model in the "
                     "same cluster), error rates far above the fleet's, and hosts missing: the "
                     "alerts of the rdmascope.fleet-drift group (rules/rdmascope.fleet.rules.yml).", [
        stat("Drifted hosts", "Hosts with a firing fleet drift alert (RdmaFleet*).",
             f"count(count by ({CLUSTER_LABEL}, instance) (ALERTS{{{drift}}})) or vector(0)"),
        stat("Hosts without RDMA device", "Answering hosts that export no RDMA device while "
             "most of their cluster does (RdmaFleetHostWithoutRdmaDevice).",
             f'count(ALERTS{{alertname="RdmaFleetHostWithoutRdmaDevice",{firing}}}) or vector(0)'),
        stat("Exporters down", "Targets Prometheus cannot scrape (RdmascopeDown): their "
             "settings are unknown.",
             f'count(ALERTS{{alertname="RdmascopeDown",{firing}}}) or vector(0)'),
        stat("Error rate outliers", "Ports counting errors or congestion more than 10 times "
             "their fleet's median (RdmaFleetErrorRateOutlier).",
             f'count(ALERTS{{alertname="RdmaFleetErrorRateOutlier",{firing}}}) or vector(0)'),
        panel("table", "Drifted hosts",
              "Each firing drift alert: the host, the setting, its value and the value most of "
              "its peers have (majority), or the error whose rate is an outlier; and the "
              "exporters that do not answer. A tie between two values fires nothing: see the "
              "runbook's Fleet drift section.",
              [(f'ALERTS{{alertname=~"RdmaFleet.*|RdmascopeDown",{firing}}}', "")],
              "short", width=24, height=10,
              transformations=[{"id": "organize", "options": {
                  "excludeByName": {"Time": True, "Value": True, "__name__": True,
                                    "alertstate": True},
                  "indexByName": {name: i for i, name in enumerate(
                      [CLUSTER_LABEL, "rack", "instance", "alertname", "severity", "device",
                       "port", "setting", "setting_value", "majority_value", "error",
                       "board_id", "hca_type", "job"])},
                  "renameByName": {"setting_value": "host's value",
                                   "majority_value": "peers' majority"}}}]),
        timeseries("Drift alerts by kind", "Firing fleet drift alerts per alert name.",
                   [(f"count by (alertname) (ALERTS{{{drift}}})", "{{alertname}}")], "short"),
        timeseries("Error rate outliers", "Rates of the ports that are outliers "
                   "(RdmaFleetErrorRateOutlier): errors or congestion per second by error.",
                   [(f"rdma:fleet_error_rate:rate5m{{{SEL}}} and on ({CLUSTER_LABEL}, instance, "
                     f'device, port, error) ALERTS{{alertname="RdmaFleetErrorRateOutlier",{firing}}}',
                     "{{instance}} {{device}} {{port}} {{error}}")], "ops"),
    ])


def row(title, description):
    """A row heading: rows hold no query (tests/rules/check_dashboards.py)."""
    return {"type": "row", "title": title, "description": description, "collapsed": False,
            "gridPos": {"w": 24, "h": 1}, "panels": []}


# Link health (issue 40): optics per lane against the module's thresholds (the dBm recording
# rules and the thresholds in effect, rules/rdmascope.rules.yml group rdmascope.link), module
# temperature and state, InfiniBand symbol BER and trained width and speed, pre-FEC BER and the
# FEC histogram's tail (group rdmascope.link-fec), down events with their reasons.
def link_health():
    nd = 'netdev=~"$netdev"'
    port = "{{instance}} {{netdev}} {{device}}/{{port}}"
    lane = port + " lane {{lane}}"
    return dashboard("rdmascope-link-health", "RDMA link health",
                     "See a failing optic or cable before it drops packets: RX and TX power per "
                     "lane against the module's thresholds, temperature, CMIS state, InfiniBand "
                     "post-FEC symbol BER, trained width and speed, errors and flaps.", [
        row("Optics", "Each pluggable module's own readings, per lane (collector link)."),
        timeseries("RX power per lane", "Received optical power (dBm) with the low warning and "
                   "low alarm in effect: the module's own, or -7 / -11 dBm when its table is "
                   "not valid (RdmaOpticRxPowerBelowWarning, RdmaOpticRxPowerBelowAlarm). A lane "
                   "without light has no dBm and no line (RdmaOpticLaneNoLight).",
                   [(f"rdma:link_module_lane_rx_power:dbm{{{SEL},{nd}}}", lane),
                    (f"rdma:link_module_rx_power_low_warning_threshold:dbm{{{SEL},{nd}}}",
                     port + " low warning"),
                    (f"rdma:link_module_rx_power_low_alarm_threshold:dbm{{{SEL},{nd}}}",
                     port + " low alarm")], "dBm"),
        timeseries("TX power per lane", "Transmitted optical power (dBm) and the module's low "
                   "warning (valid tables only).",
                   [(f"rdma:link_module_lane_tx_power:dbm{{{SEL},{nd}}}", lane),
                    (f'rdma:link_module_tx_power_threshold:dbm{{{SEL},{nd},level="warning",bound="low"}}',
                     port + " low warning")], "dBm"),
        timeseries("Module temperature", "Case temperature with the high warning and alarm in "
                   "effect (the module's, else 70 / 80 C: RdmaOpticTemperatureHigh, "
                   "RdmaOpticTemperatureCritical); a rise of 10 C in 10 minutes is "
                   "RdmaOpticTemperatureJump.",
                   [(f"rdma_link_module_temperature_celsius{{{SEL},{nd}}}", port),
                    (f"rdma:link_module_temperature_high_warning_threshold:celsius{{{SEL},{nd}}}",
                     port + " high warning"),
                    (f"rdma:link_module_temperature_high_alarm_threshold:celsius{{{SEL},{nd}}}",
                     port + " high alarm")], "celsius"),
        timeseries("Laser bias per lane", "TX bias current; a slow rise is an aging laser "
                   "(RdmaOpticTxBiasHigh against the module's high warning).",
                   [(f"rdma_link_module_lane_tx_bias_amperes{{{SEL},{nd}}}", lane),
                    (f'rdma_link_module_tx_bias_threshold_amperes{{{SEL},{nd},level="warning",bound="high"}}',
                     port + " high warning")], "amp"),
        table("Module state", "CMIS module state (ready, or low power, powering up or down, "
              "fault with its cause: RdmaOpticModuleFault, RdmaOpticModuleNotReady) and which "
              "threshold tables are valid (0: the alerts use the defaults).",
              [(f"rdma_link_module_state_info{{{SEL},{nd}}}", ""),
               (f"rdma_link_module_thresholds_valid{{{SEL},{nd}}}", "")], width=12),
        table("Sources missing", "Ports whose link sources do not answer (0): no module, no "
              "module access (rxe, native InfiniBand through ethtool), no PMA counters: their "
              "series are absent, never healthy zeros.",
              [(f"rdma_link_source_available{{{SEL},{nd}}} == 0", "")], width=12),
        table("Modules", "Identity of each module: vendor, part, serial, revision, media, "
              "wavelength, CMIS firmware (fleet drift compares them across hosts).",
              [(f"rdma_link_module_info{{{SEL},{nd}}}", "")]),
        row("InfiniBand", "Native InfiniBand ports: BER as UFM validates it, trained width and "
            "speed (the rdma and link collectors)."),
        timeseries("Post-FEC symbol BER", "Symbol errors per bit on HDR and faster, where "
                   "symbol_error counts what FEC did not correct, over 12 and 125 minutes; UFM "
                   "fails a port at 1e-14 and 1e-15 (RdmaIbSymbolBerHigh). EDR and slower: raw.",
                   [(f"rdma:port_post_fec_symbol_ber:rate12m{{{SEL}}}",
                     "{{instance}} {{device}}/{{port}} 12m"),
                    (f"rdma:port_post_fec_symbol_ber:rate125m{{{SEL}}}",
                     "{{instance}} {{device}}/{{port}} 125m"),
                    (f"rdma:port_raw_symbol_ber:rate12m{{{SEL}}}",
                     "{{instance}} {{device}}/{{port}} raw 12m")], "sci"),
        timeseries("Width and lane speed", "Lanes trained and the data rate per lane; a drop "
                   "below what the port ran at is RdmaIbLinkWidthDegraded / "
                   "RdmaIbLinkSpeedDegraded.",
                   [(f"rdma_link_ib_width_lanes{{{SEL}}}", "{{instance}} {{device}}/{{port}} lanes"),
                    (f"rdma_link_ib_lane_rate_bits_per_second{{{SEL}}} / 1000000000",
                     "{{instance}} {{device}}/{{port}} Gb/s a lane")], "short"),
        row("FEC and BER", "Errors on the line before and after FEC: pre-FEC BER per port and "
            "lane, the FEC histogram's tail, uncorrectable codewords, the trained speed "
            "(collector link: ethtool FEC_GET and LINKMODES_GET), InfiniBand symbol and RoCE "
            "CRC errors."),
        timeseries("Pre-FEC BER", "Corrected bits per bit on the wire over 12 minutes, with the "
                   "warning threshold for the port's FEC and media (RS-FEC on PAM4: 1e-7, copper "
                   "1e-8; critical 100x: RdmaLinkPreFecBerHigh, RdmaLinkPreFecBerCritical). "
                   "source says where the bits come from: fec (the kernel's FEC statistics), "
                   "ethtool_stats (the driver's own counter), or an estimate.",
                   [(f"rdma:link_fec_pre_ber:rate12m{{{SEL},{nd}}}", port + " {{source}}"),
                    (f"rdma:link_fec_pre_ber_warning_threshold{{{SEL},{nd}}}",
                     port + " warning")], "sci"),
        timeseries("Pre-FEC BER per lane", "The same per FEC lane: one bad lane is one bad "
                   "fibre, laser or SerDes.",
                   [(f"rdma:link_fec_lane_pre_ber:rate12m{{{SEL},{nd}}}", lane)], "sci"),
        timeseries("FEC histogram tail", "Symbol errors per codeword of the worst codewords "
                   "corrected in 12 minutes (Linux 6.18's FEC histogram); RS(544,514) corrects "
                   "15: above 8 warns, above 12 is critical (RdmaLinkFecTailHigh, "
                   "RdmaLinkFecTailCritical).",
                   [(f"rdma:link_fec_tail_symbol_errors:increase12m{{{SEL},{nd}}}", port)],
                   "short"),
        timeseries("Uncorrectable codewords", "Codewords FEC could not correct, each a lost "
                   "frame (RdmaLinkFecUncorrectable, critical at any).",
                   [(f"increase(rdma_link_fec_uncorrectable_codewords_total{{{SEL},{nd}}}"
                     "[$__rate_interval])", port)], "short"),
        timeseries("Speed against the maximum", "The speed the link trained at, the port's "
                   "fastest mode, the fastest both ends advertise and the module's advertised "
                   "maximum: below the common maximum, or without the partner's modes below "
                   "both the port's and the module's, is RdmaLinkSpeedDegraded (400G trained "
                   "at 200G).",
                   [(f"rdma_link_speed_bits_per_second{{{SEL},{nd}}}", port + " speed"),
                    (f"rdma_link_max_speed_bits_per_second{{{SEL},{nd}}}", port + " port max"),
                    (f"rdma_link_common_max_speed_bits_per_second{{{SEL},{nd}}}",
                     port + " common max"),
                    (f"rdma_link_module_max_speed_bits_per_second{{{SEL},{nd}}}",
                     port + " module max")], "bps"),
        table("FEC mode", "The FEC each port runs (rs, baser, llrs, none) and whether it was "
              "chosen by autonegotiation.",
              [(f"rdma_link_fec_info{{{SEL},{nd}}}", "")], width=12),
        timeseries("Symbol errors", "InfiniBand port symbol errors per second (RdmaSymbolErrors; "
                   "a saturated counter reads 0: RdmaPortCounterSaturated).",
                   [(f"rate(rdma_port_symbol_errors_total{{{SEL}}}[$__rate_interval])",
                     "{{instance}} {{device}}/{{port}}")], "pps"),
        timeseries("CRC errors", "Frames received with a bad FCS on RDMA netdevs "
                   "(RdmaCrcErrors).",
                   [(f"rate(rdma_netdev_crc_errors_total{{{SEL}}}[$__rate_interval])",
                     "{{instance}} {{device}}")], "pps"),
        row("Flaps", "Links going down and why: the exporter's own down edges with the driver's "
            "reason, the PHY's count, the kernel's carrier changes, the IB PMA counters."),
        timeseries("Down events by reason", "Carrier-down edges with the driver's extended "
                   "link state then (no_cable, link_training_failure...; none: the driver gives "
                   "none). One in 10 minutes warns, three is critical (RdmaLinkWentDown, "
                   "RdmaLinkDownRepeatedly); the events are on the exporter's /debug/links.",
                   [(f"increase(rdma_link_down_events_total{{{SEL},{nd}}}[$__rate_interval])",
                     port + " {{reason}} {{substate}}")], "short"),
        timeseries("PHY down events and carrier changes", "The PHY's own down count (flaps too "
                   "short for the carrier to show) and the kernel's carrier changes, up and "
                   "down.",
                   [(f"increase(rdma_link_phy_down_events_total{{{SEL},{nd}}}[$__rate_interval])",
                     port + " PHY downs"),
                    (f"increase(rdma_link_carrier_changes_total{{{SEL},{nd}}}[$__rate_interval])",
                     port + " carrier changes")], "short"),
        table("Last down reason", "Each port's last carrier-down reason and substate.",
              [(f"rdma_link_last_down_info{{{SEL},{nd}}}", "")], width=12),
        timeseries("Link downed", "Times the link went down (IB PMA link_downed, 8-bit: "
                   "RdmaLinkFlapping).",
                   [(f"increase(rdma_port_link_downed_total{{{SEL}}}[$__rate_interval])",
                     "{{instance}} {{device}}/{{port}}")], "short"),
        timeseries("Link error recovery", "Times the link retrained without going down (IB PMA "
                   "link_error_recovery, 8-bit): a marginal link.",
                   [(f"increase(rdma_port_link_error_recovery_total{{{SEL}}}[$__rate_interval])",
                     "{{instance}} {{device}}/{{port}}")], "short"),
        timeseries("Port state", "1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE (RdmaPortDown).",
                   [(f"rdma_port_state{{{SEL}}}", "{{instance}} {{device}}/{{port}}")], "short"),
    ], [("netdev", "Interface",
         f'label_values(rdma_link_source_available{{{SEL}}}, netdev)', ".*")])


DASHBOARDS = {
    "host-overview.json": host_overview,
    "nic-roce-health.json": nic_roce,
    "memory-registrations.json": memory_registrations,
    "queues.json": queues,
    "cpu-memory-controller.json": cpu_memory,
    "fleet.json": fleet,
    "link-health.json": link_health,
}


def render():
    return {name: json.dumps(build(), indent=2, sort_keys=True) + "\n"
            for name, build in DASHBOARDS.items()}


def main(argv):
    parser = argparse.ArgumentParser(description="Generate rdmascope's Grafana dashboards.")
    parser.add_argument("--selector", default="", metavar="MATCHERS",
                        help="label matchers added to every query, e.g. 'job=\"rdmascope\"'")
    parser.add_argument("--cluster-label", default="cluster", metavar="NAME",
                        help="the target label naming a cluster (default: %(default)s)")
    parser.add_argument("output_dir", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z_]\w*", args.cluster_label):
        parser.error(f"--cluster-label: {args.cluster_label!r} is not a label name")
    if args.selector and not re.fullmatch(r'\s*[A-Za-z_]\w*\s*(=|!=|=~|!~)\s*"[^"]*"\s*'
                                          r'(,\s*[A-Za-z_]\w*\s*(=|!=|=~|!~)\s*"[^"]*"\s*)*',
                                          args.selector):
        parser.error(f"--selector: {args.selector!r} is not a comma-separated list of label "
                     "matchers (no braces)")
    configure(args.selector, args.cluster_label)
    os.makedirs(args.output_dir, exist_ok=True)
    for name, text in render().items():
        with open(os.path.join(args.output_dir, name), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
