import Glibc
import ConfigFile
import ParkWiseCore
import Uplink

/// Whether the agent service runs (it holds the state directory's lock) and what it reports on its status socket.
enum ServiceChecks {
    struct Found {
        var running: Bool
        var status: AgentStatus?
        var steps: [ProbeStep]
    }

    static func check(_ config: AgentConfig, configPath: String) -> Found {
        let lock = config.outbox.path + "/agent.lock"
        var st = stat()
        if (stat(lock, &st) != 0 && errno == EACCES) || (stat(lock, &st) == 0 && access(lock, R_OK) != 0) {
            return Found(running: false, status: nil, steps: [
                ProbeStep(.warning, "cannot tell whether the agent service runs", detail: "\(lock) is not readable by \(HostChecks.userName())",
                          fix: "run doctor as the service's user: sudo -u parkwise parkwise-agent doctor")])
        }
        guard let holder = StateDirectoryLock.holder(directory: config.outbox.path) else {
            return Found(running: false, status: nil, steps: [
                ProbeStep(.warning, "the agent service is not running", detail: "nobody holds \(config.outbox.path)/agent.lock",
                          fix: "systemctl start parkwise-agent (and journalctl -u parkwise-agent if it does not stay up)")])
        }
        let path = StatusClient.locate(StatusSocket.candidates(outboxPath: config.outbox.path))
        switch StatusClient.fetch(path: path) {
        case .failure(let failure):
            return Found(running: true, status: nil, steps: [
                ProbeStep(.ok, "the agent service is running", detail: "\(holder) holds \(config.outbox.path)/agent.lock"),
                ProbeStep(.warning, "its status", detail: failure.message, fix: failure.hint)])
        case .success(let status):
            var steps = [ProbeStep(.ok, "the agent service is running",
                                   detail: "pid \(status.pid), version \(status.version), up \(HostChecks.duration(status.uptimeSeconds)), "
                                       + "boot \(status.boot)" + (status.mode == "live" ? "" : ", \(status.mode)"))]
            let hash = ConfigFile.hash(path: configPath)
            if let running = status.configHash, let hash, running != hash {
                steps.append(ProbeStep(.warning, "it runs another version of \(configPath)",
                                       detail: "config hash \(running), the file's is \(hash)",
                                       fix: "systemctl restart parkwise-agent to apply the file (check-config it first)"))
            }
            let link = status.link
            if link.isConnected {
                steps.append(ProbeStep(.ok, "its link is connected", detail: "to \(link.broker ?? "?")"
                                       + (link.connectedSince.map { " since \($0)" } ?? "") + ", \(link.reconnects) reconnects"))
            } else {
                steps.append(ProbeStep(.warning, "its link is not connected (\(link.state))", detail: link.lastLoss,
                                       fix: "see the broker checks below; events wait in the outbox meanwhile"))
            }
            if status.clock == "unsynced" {
                steps.append(ProbeStep(.warning, "it stamps events clock: unsynced", fix: "see the clock check below"))
            }
            return Found(running: true, status: status, steps: steps)
        }
    }
}
