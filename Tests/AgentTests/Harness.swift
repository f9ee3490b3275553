import Foundation
import Testing
import TestSupport

/// Runs the agent binary to completion and returns exit code, stdout and stderr.
func runAgent(_ arguments: [String], timeout: Double = 20) throws -> (code: Int32, out: String, err: String) {
    let child = try Child(agentBinary, arguments)
    guard let code = child.wait(timeout) else {
        child.signal(SIGKILL)
        Issue.record("parkwise-agent \(arguments) did not finish")
        return (-1, child.stdout, child.stderr)
    }
    return (code, child.stdout, child.stderr)
}
