// discovery-bench: browse fan-out benchmarks of Discovery and discoverd (BENCHMARKS-discovery.md).
//
//   discovery-bench library [--subscribers 1000] [--events 50] [--type _dbench._tcp] [--resolve-check]
//                           [--dbus unix:path=...] [--lab Scripts/lab] [--json FILE]
//   discovery-bench daemon  --socket PATH [--subscribers 1000] [--events 50] [--type ...] [--dbus ...] [--json FILE]
//
// Both need host A's bus (DBUS_SYSTEM_BUS_ADDRESS=$LAB_A_DBUS or --dbus) and the lab up: the peer is
// `Scripts/lab exec b avahi-publish -s NAME TYPE 9000`, one process per instance, withdrawn with SIGTERM.
// Target 3 (advertise latency) is Sources/discovery-bench/adlatency.py, run by Scripts/bench-discovery.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

signal(SIGPIPE, SIG_IGN)
let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    log("usage: discovery-bench library|daemon [options] (see Sources/discovery-bench/main.swift)")
    exit(2)
}
let options = Options(arguments.dropFirst(2))
switch arguments[1] {
case "library": runLibraryFanout(options)
case "daemon": runDaemonFanout(options)
default:
    log("unknown mode \(arguments[1])")
    exit(2)
}
exit(0)
