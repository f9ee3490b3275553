import Foundation
import Testing
import TestSupport

/// SIGTERM/SIGINT for `run`: the first stops gracefully (offline status, acknowledgements awaited for a few
/// seconds), a second one later forces the exit; the same request delivered twice at once (to the process and its
/// group) is still one graceful stop.
@Suite struct StopSignalTests {
    /// A running agent whose broker has stopped answering: a graceful stop waits for acknowledgements.
    private func agentWithFrozenBroker(_ dir: URL, _ broker: Broker) throws -> Child {
        let agent = try Child(agentBinary, ["run", "--config", try writeGarage(dir), "--replay", try writeTrace(dir, ""),
                                            "--broker", broker.url, "--outbox", dir.path + "/outbox"])
        #expect(eventually(10) { agent.stderr.contains("uplink connected") }, "\(agent.stderr)")
        broker.pause()
        return agent
    }

    @Test func aSecondSignalForcesTheExitWhileTheGracefulStopWaits() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let agent = try agentWithFrozenBroker(dir, broker)
        agent.signal(SIGTERM)
        #expect(eventually(5) { agent.stderr.contains("stop requested") })
        // A second signal within half a second counts as the same request: this one must come later.
        usleep(700_000)
        agent.signal(SIGTERM)
        let code = agent.wait(10)
        broker.resume()
        #expect(code == 1, "\(agent.stderr)")
        #expect(agent.stderr.contains("second stop signal, forced exit"))
        #expect(!agent.stderr.contains("info stopped "), "the graceful stop did not finish first: \(agent.stderr)")
    }

    @Test func theSameRequestDeliveredTwiceAtOnceIsOneGracefulStop() throws {
        let dir = temporaryDirectory()
        let broker = try Broker()
        let agent = try agentWithFrozenBroker(dir, broker)
        agent.signal(SIGTERM)
        agent.signal(SIGTERM)
        let code = agent.wait(20)
        broker.resume()
        #expect(code == 0, "\(agent.stderr)")
        #expect(!agent.stderr.contains("forced exit"))
        #expect(agent.stderr.contains("broker did not acknowledge everything before stopping"))
    }
}
