import Glibc
import ConfigFile
import ParkWiseCore
import MQTT
import Uplink

/// Whether the agent service runs (it holds the state directory's lock) and what it reports on its status socket.
enum ServiceChecks {
    struct Found {
        var running: Bool
        var status: AgentStatus?
        var steps: [ProbeStep]
        /// Whether doctor could tell if the service runs (false: the lock and the status socket are closed to it, and
        /// it must not grab the lines a running service may hold).
        var known = true
    }

    static func check(_ config: AgentConfig, configPath: String) -> Found {
        let lock = config.outbox.path + "/agent.lock"
        let candidates = StatusSocket.candidates(outboxPath: config.outbox.path)
        let expected = (site: config.site, device: config.device)
        var st = stat()
        if (stat(lock, &st) != 0 && errno == EACCES) || (stat(lock, &st) == 0 && access(lock, R_OK) != 0) {
            // Another user's state directory: the status socket may still answer (the service's group may read it).
            let path = StatusClient.locate(candidates)
            switch StatusClient.fetch(path: path, expecting: expected, config: configPath) {
            case .success(let status):
                return described(status, configPath: configPath, source: "from its status socket \(path); \(lock) is not readable by \(HostChecks.userName())")
            case .failure(let failure):
                return Found(running: false, status: nil, steps: [
                    ProbeStep(.warning, "not checked: whether the agent service runs",
                              detail: "\(lock) is not readable by \(HostChecks.userName()), and its status socket: \(failure.message)",
                              fix: HostChecks.stateAccess(config.outbox.path).fix)], known: false)
            }
        }
        guard let holder = StateDirectoryLock.holder(directory: config.outbox.path) else {
            // An agent whose state directory cannot be used at all (a missing directory on a read-only disk) runs
            // without the lock, its events in memory: its status socket still answers.
            let path = StatusClient.locate(candidates)
            if case .success(let status) = StatusClient.fetch(path: path, expecting: expected, config: configPath) {
                return described(status, configPath: configPath, source: "from its status socket \(path); nobody holds \(lock): "
                                 + "its state directory cannot be used, see the outbox checks")
            }
            return Found(running: false, status: nil, steps: [
                ProbeStep(.warning, "the agent service is not running", detail: "nobody holds \(config.outbox.path)/agent.lock",
                          fix: "systemctl start parkwise-agent (and journalctl -u parkwise-agent if it does not stay up)")])
        }
        let path = StatusClient.locate(candidates)
        switch StatusClient.fetch(path: path, expecting: expected, config: configPath) {
        case .failure(let failure):
            return Found(running: true, status: nil, steps: [
                ProbeStep(.ok, "the agent service is running", detail: "\(holder) holds \(config.outbox.path)/agent.lock"),
                ProbeStep(.warning, "its status", detail: failure.message, fix: failure.hint)])
        case .success(let status):
            return described(status, configPath: configPath, source: nil)
        }
    }

    /// The service's state as its status tells it.
    private static func described(_ status: AgentStatus, configPath: String, source: String?) -> Found {
        var steps = [ProbeStep(.ok, "the agent service is running",
                               detail: "pid \(status.pid), version \(status.version), up \(HostChecks.duration(status.uptimeSeconds)), "
                                   + "boot \(status.boot)" + (status.mode == "live" ? "" : ", \(status.mode)")
                                   + (source.map { " (\($0))" } ?? ""))]
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
        if let conflict = link.idConflict {
            steps.append(ProbeStep(.failed, "another board uses this device id", detail: conflict, fix: AgentStatus.Link.idConflictFix))
        }
        if let refused = link.publishRefused {
            steps.append(ProbeStep(.failed, "the broker refuses its events (kept in the outbox)", detail: refused,
                                   fix: UplinkSession.refusalHint))
        }
        if status.clock == "unsynced" {
            steps.append(ProbeStep(.warning, "it stamps events clock: unsynced", fix: "see the clock check below"))
        }
        return Found(running: true, status: status, steps: steps)
    }
}
