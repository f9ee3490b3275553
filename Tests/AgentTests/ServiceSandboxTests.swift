import Foundation
import Testing
import TestSupport
@testable import ServiceSetup

/// What the shipped unit's sandbox (and a drop-in) lets the service write, decided from the unit's text alone: the
/// decision `doctor` and `check-config` report, with no systemd on the machine.
@Suite struct ServiceSandboxTests {
    let shipped = try! String(contentsOfFile: packageRoot + "/deploy/systemd/parkwise-agent.service", encoding: .utf8)

    func sandbox(_ dropIns: String...) -> ServiceSandbox { ServiceSandbox(files: [shipped] + dropIns) }

    @Test func theShippedUnitLetsTheServiceWriteOnlyItsStateDirectory() {
        let unit = sandbox()
        #expect(unit.protectSystem == "strict")
        #expect(unit.stateDirectories == ["parkwise-agent"])
        #expect(unit.problem(outbox: "/var/lib/parkwise-agent/outbox") == nil)
        #expect(unit.problem(outbox: "/var/lib/parkwise-agent") == nil)
        #expect(unit.rule(for: "/var/lib/parkwise-agent/outbox")?.setting == "StateDirectory=parkwise-agent")
        for elsewhere in ["/data/parkwise", "/srv/parkwise/outbox", "/var/lib/parkwise-agent2", "/var/lib/parkwise-agent/../x"] {
            let problem = unit.problem(outbox: elsewhere)
            #expect(problem?.message == "outbox directory \(elsewhere) is read-only for the service (parkwise-agent.service has "
                    + "ProtectSystem=strict: it keeps files only in /var/lib/parkwise-agent)", "\(elsewhere)")
            #expect(problem?.hint.contains("sudo systemctl edit parkwise-agent, add the two lines `[Service]` and "
                                           + "`ReadWritePaths=\(elsewhere)`") == true)
            #expect(problem?.hint.contains("sudo install -d -o parkwise -g parkwise -m 750 \(elsewhere);") == true)
        }
    }

    @Test func aDropInsReadWritePathsCoversTheDirectoryAndWhatIsBelowIt() {
        let unit = sandbox("# systemctl edit parkwise-agent\n[Service]\nReadWritePaths=/data/parkwise\n")
        #expect(unit.problem(outbox: "/data/parkwise") == nil)
        #expect(unit.problem(outbox: "/data/parkwise/outbox/") == nil)
        #expect(unit.rule(for: "/data/parkwise/outbox")?.setting == "ReadWritePaths=/data/parkwise")
        #expect(unit.problem(outbox: "/data/parkwise2") != nil)
        #expect(unit.problem(outbox: "/data") != nil)
        #expect(unit.problem(outbox: "/data")?.message.hasSuffix("it keeps files only in /var/lib/parkwise-agent, /data/parkwise)") == true)
    }

    @Test func listsAddUpAcrossDropInsUntilAnEmptyAssignmentClearsThem() {
        let two = sandbox("[Service]\nReadWritePaths=-/data/a %S/elsewhere\n", "[Service]\nReadWritePaths=/data/b\n")
        #expect(two.readWritePaths == ["/data/a", "/var/lib/elsewhere", "/data/b"])
        let cleared = sandbox("[Service]\nReadWritePaths=/data/a\n", "[Service]\nReadWritePaths=\nReadWritePaths=/data/b\n")
        #expect(cleared.readWritePaths == ["/data/b"])
        #expect(cleared.problem(outbox: "/data/a") != nil)
        #expect(sandbox("[Service]\nStateDirectory=\n").problem(outbox: "/var/lib/parkwise-agent/outbox") != nil)
    }

    @Test func onlyTheServiceSectionCountsAndLinesContinue() {
        let unit = sandbox("[Unit]\nReadWritePaths=/data/unit\n[Install]\nReadWritePaths=/data/install\n",
                           "[Service]\n; a comment\nReadWritePaths = /data/one \\\n  /data/two\r\n")
        #expect(unit.readWritePaths == ["/data/one", "/data/two"])
        #expect(unit.problem(outbox: "/data/two") == nil)
        #expect(unit.problem(outbox: "/data/unit") != nil)
    }

    @Test func aLaterProtectSystemAndDeeperRulesDecide() {
        let full = sandbox("[Service]\nProtectSystem=full\n")
        #expect(full.problem(outbox: "/data/parkwise") == nil)
        #expect(full.problem(outbox: "/etc/parkwise-agent/outbox")?.message.contains("ProtectSystem=full") == true)
        #expect(sandbox("[Service]\nProtectSystem=no\n").problem(outbox: "/srv/x") == nil)
        #expect(sandbox("[Service]\nProtectSystem=false\n").problem(outbox: "/usr/x") == nil)
        let deeper = sandbox("[Service]\nReadWritePaths=/data\nReadOnlyPaths=/data/archive\n")
        #expect(deeper.problem(outbox: "/data/live") == nil)
        #expect(deeper.problem(outbox: "/data/archive/outbox")?.message.contains("has ReadOnlyPaths=/data/archive") == true)
        let home = sandbox().problem(outbox: "/home/pi/outbox")
        #expect(home?.message.hasPrefix("outbox directory /home/pi/outbox is hidden for the service (parkwise-agent.service "
                                        + "has ProtectHome=yes") == true)
    }

    /// PrivateTmp= makes /tmp writable, and empties it at every stop: an outbox there forgets its events.
    @Test func anOutboxInTheServicesPrivateTmpWouldNotSurviveARestart() {
        let problem = sandbox().problem(outbox: "/tmp/parkwise")
        #expect(problem?.message.contains("private /tmp (parkwise-agent.service has PrivateTmp=yes): emptied at every stop") == true)
        #expect(problem?.hint.hasPrefix("keep the outbox under /var/lib/parkwise-agent") == true)
    }

    /// The error `run` logs when its first write in the outbox directory fails with EROFS.
    @Test func aReadOnlyDirectoryUnderTheServiceIsMostLikelyItsSandbox() {
        let sandboxed = ServiceSandbox.readOnly(directory: "/data/parkwise", underService: true)
        #expect(sandboxed.message == "outbox directory /data/parkwise is read-only (EROFS): most likely the service's sandbox "
                + "(ProtectSystem=strict in parkwise-agent.service) lets the agent write only /var/lib/parkwise-agent and its "
                + "ReadWritePaths=")
        #expect(sandboxed.hint.contains("`ReadWritePaths=/data/parkwise`"))
        // In the state directory, or run by hand: the file system itself is read-only.
        for (directory, service) in [("/var/lib/parkwise-agent/outbox", true), ("/data/parkwise", false)] {
            let mounted = ServiceSandbox.readOnly(directory: directory, underService: service)
            #expect(mounted.message == "outbox directory \(directory) is on a read-only file system (EROFS)")
            #expect(mounted.hint.contains("findmnt -T \(directory) and dmesg"))
        }
    }

    /// The files as systemd finds them under a root: /etc's unit over the package's, drop-ins in name order, a drop-in
    /// in /etc hiding one of the same name in /lib; nothing at all without a unit, or with a masked one.
    @Test func theInstalledUnitAndItsDropInsAreReadUnderARoot() throws {
        let root = temporaryDirectory().path
        #expect(ServiceSandbox.installed(root: root) == nil)
        func write(_ path: String, _ text: String) throws {
            try FileManager.default.createDirectory(atPath: root + (path as NSString).deletingLastPathComponent,
                                                    withIntermediateDirectories: true)
            try text.write(toFile: root + path, atomically: true, encoding: .utf8)
        }
        try write("/lib/systemd/system/parkwise-agent.service", shipped)
        try write("/lib/systemd/system/parkwise-agent.service.d/10-data.conf", "[Service]\nReadWritePaths=/data/lib\n")
        try write("/etc/systemd/system/parkwise-agent.service.d/20-srv.conf", "[Service]\nReadWritePaths=/srv/etc\n")
        try write("/etc/systemd/system/parkwise-agent.service.d/notes.txt", "[Service]\nReadWritePaths=/not/a/conf\n")
        var (unit, files) = try #require(ServiceSandbox.installed(root: root))
        #expect(files == [root + "/lib/systemd/system/parkwise-agent.service",
                          root + "/lib/systemd/system/parkwise-agent.service.d/10-data.conf",
                          root + "/etc/systemd/system/parkwise-agent.service.d/20-srv.conf"])
        #expect(unit.readWritePaths == ["/data/lib", "/srv/etc"])
        try write("/etc/systemd/system/parkwise-agent.service.d/10-data.conf", "[Service]\nReadWritePaths=/data/etc\n")
        (unit, _) = try #require(ServiceSandbox.installed(root: root))
        #expect(unit.readWritePaths == ["/data/etc", "/srv/etc"])
        try FileManager.default.createSymbolicLink(atPath: root + "/etc/systemd/system/parkwise-agent.service",
                                                   withDestinationPath: "/dev/null")
        #expect(ServiceSandbox.installed(root: root) == nil)
    }
}

extension ServiceSandboxTests {
    /// mountinfo's two sets of options: a read-only view of a writable file system (systemd's sandbox, a ro bind mount)
    /// is not a read-only file system; the deepest mount holding the path decides, a missing directory by its parent.
    @Test func aReadOnlyFileSystemIsToldFromAReadOnlyView() {
        let existing = temporaryDirectory().path
        let info = """
        27 1 259:2 / / rw,relatime shared:1 - ext4 /dev/root rw
        80 27 0:40 / \(existing) ro,relatime - tmpfs none ro
        """
        #expect(ReadOnlyMount.of(existing + "/outbox/deeper", mountinfo: info)
                == ReadOnlyMount(mountPoint: existing, fileSystem: true))
        let view = info.replacingOccurrences(of: "- tmpfs none ro", with: "- tmpfs none rw")
        #expect(ReadOnlyMount.of(existing + "/outbox", mountinfo: view) == ReadOnlyMount(mountPoint: existing, fileSystem: false))
        #expect(ReadOnlyMount.of("/", mountinfo: info) == nil)
        let sandboxed = ServiceSandbox.readOnly(directory: "/data/parkwise", underService: true,
                                                mount: ReadOnlyMount(mountPoint: "/data", fileSystem: true))
        #expect(sandboxed.message == "outbox directory /data/parkwise is on a read-only file system (EROFS): /data is mounted read-only")
        #expect(sandboxed.hint.contains("sudo mount -o remount,rw /data") && !sandboxed.hint.contains("ReadWritePaths="))
    }
}
