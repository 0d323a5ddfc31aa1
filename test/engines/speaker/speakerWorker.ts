/** Worker task module for tasks.test.ts: the pool's built-ins plus the speaker kinds only. */
import { poolTasks, serveTasks } from "../../../engines/tasks.ts"
import { speakerTasks } from "../../../engines/speaker/tasks.ts"

export default serveTasks({ ...poolTasks, ...speakerTasks })
