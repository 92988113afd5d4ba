"""Every GraphQL document the GitHub Issues tracker sends, each one named operation.

Registered under backend "github" beside the forge's documents (`legion.forges.github`), with
names of their own (`Issue...`, `Project...`), so the contract test validates each against
GitHub's published schema (`tests/contract/schemas/github.schema.json`).

Every document that reads an issue declares `$withProject`: the issue's Projects (v2) items are
asked for only when a project holds the status, so a token without the `project` scope works
for a project that has none.

Sizes: a page of 100 issues with 50 labels, 20 project items and 5 closing pull requests each
is about 7,500 nodes (GitHub refuses 500,000) and costs 1 point of the hourly 5,000.
"""

from __future__ import annotations

from legion.graphql_client import document
from legion.trackers.graphql import CommentEdit

BACKEND = "github"
ISSUE_PAGE_SIZE = 100  # GitHub's largest page
LABEL_PAGE_SIZE = 100
COMMENT_PAGE_SIZE = 100
ISSUE_LABELS = 50  # an issue's labels read with it
PROJECT_ITEMS = 20  # an issue's project items read with it: the configured project's is one
CROSS_REFERENCES = 50  # the issues that mention one, read to find its sub-issues
CLOSING_PRS = 5  # the pull requests that close an issue, read with it: its links
STATUS_FIELD = "Status"  # the single-select field of the project that holds the status

# What Legion reads of an issue, everywhere it reads one. The pull requests whose body closes
# it are its links, merged and closed ones too: a merged PR is how its issue's work ends.
_ISSUE_FIELDS = f"""
fragment LegionIssue on Issue {{
  id
  number
  title
  body
  url
  state
  createdAt
  updatedAt
  labels(first: {ISSUE_LABELS}) {{ nodes {{ id name }} }}
  closedByPullRequestsReferences(
    first: {CLOSING_PRS}, includeClosedPrs: true, orderByState: true
  ) {{
    nodes {{ url }}
  }}
  projectItems(first: {PROJECT_ITEMS}) @include(if: $withProject) {{
    nodes {{
      id
      project {{ id }}
      fieldValueByName(name: "{STATUS_FIELD}") {{
        ... on ProjectV2ItemFieldSingleSelectValue {{ name optionId }}
      }}
    }}
  }}
}}
"""

_COMMENT_FIELDS = """
fragment LegionIssueComment on IssueComment {
  id
  body
  createdAt
  author { __typename login }
  authorAssociation
  viewerDidAuthor
}
"""

# Who the token is, the repository (its id, its labels' first page) and, with a project, the
# project of the repository's owner with its Status field and options. `$project` is any
# number when `$withProject` is false: that part is not asked.
REPOSITORY = document(
    BACKEND,
    f"""
query IssueRepository(
  $owner: String!, $name: String!, $project: Int!, $withProject: Boolean!
) {{
  viewer {{ login }}
  repository(owner: $owner, name: $name) {{
    id
    nameWithOwner
    hasIssuesEnabled
    viewerPermission
    labels(first: {LABEL_PAGE_SIZE}) {{
      nodes {{ id name }}
      pageInfo {{ hasNextPage endCursor }}
    }}
    owner {{
      login
      ... on ProjectV2Owner {{
        projectV2(number: $project) @include(if: $withProject) {{
          id
          number
          title
          closed
          field(name: "{STATUS_FIELD}") {{
            __typename
            ... on ProjectV2SingleSelectField {{ id name options {{ id name }} }}
          }}
        }}
      }}
    }}
  }}
}}
""",
)

LABEL_PAGE = document(
    BACKEND,
    f"""
query IssueLabelPage($owner: String!, $name: String!, $after: String) {{
  repository(owner: $owner, name: $name) {{
    labels(first: {LABEL_PAGE_SIZE}, after: $after) {{
      nodes {{ id name }}
      pageInfo {{ hasNextPage endCursor }}
    }}
  }}
}}
""",
)

# A page of the issues in `$states`; with `$withRecentlyClosed` (the first page of an unfiltered
# list) the most recently updated closed issues come along in the same request.
ISSUE_PAGE = document(
    BACKEND,
    f"""
query IssuePage(
  $owner: String!, $name: String!, $states: [IssueState!]!, $order: IssueOrder!,
  $labels: [String!], $after: String, $withProject: Boolean!, $withRecentlyClosed: Boolean!
) {{
  repository(owner: $owner, name: $name) {{
    issues(
      states: $states, labels: $labels, orderBy: $order, first: {ISSUE_PAGE_SIZE}, after: $after
    ) {{
      nodes {{ ...LegionIssue }}
      pageInfo {{ hasNextPage endCursor }}
    }}
    recentlyClosed: issues(
      states: [CLOSED], labels: $labels, orderBy: {{field: UPDATED_AT, direction: DESC}},
      first: {ISSUE_PAGE_SIZE}
    ) @include(if: $withRecentlyClosed) {{
      nodes {{ ...LegionIssue }}
    }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

# One issue by number (a pull request's number answers as one: told apart by `__typename`),
# with the issues that mention it: those whose "Parent:" line names it are its sub-issues.
ISSUE = document(
    BACKEND,
    f"""
query IssueByNumber(
  $owner: String!, $name: String!, $number: Int!, $withProject: Boolean!
) {{
  repository(owner: $owner, name: $name) {{
    issueOrPullRequest(number: $number) {{
      __typename
      ... on Issue {{
        ...LegionIssue
        timelineItems(itemTypes: [CROSS_REFERENCED_EVENT], first: {CROSS_REFERENCES}) {{
          nodes {{
            ... on CrossReferencedEvent {{
              isCrossRepository
              source {{ ... on Issue {{ number body }} }}
            }}
          }}
        }}
      }}
    }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

COMMENTS = document(
    BACKEND,
    f"""
query IssueComments(
  $owner: String!, $name: String!, $number: Int!,
  $first: Int, $after: String, $last: Int, $before: String
) {{
  repository(owner: $owner, name: $name) {{
    issue(number: $number) {{
      comments(first: $first, after: $after, last: $last, before: $before) {{
        nodes {{ ...LegionIssueComment }}
        pageInfo {{ hasNextPage endCursor hasPreviousPage startCursor }}
      }}
    }}
  }}
}}
{_COMMENT_FIELDS}
""",
)

CREATE_ISSUE = document(
    BACKEND,
    f"""
mutation IssueCreate(
  $repositoryId: ID!, $title: String!, $body: String!, $labelIds: [ID!], $withProject: Boolean!
) {{
  createIssue(
    input: {{repositoryId: $repositoryId, title: $title, body: $body, labelIds: $labelIds}}
  ) {{
    issue {{ ...LegionIssue }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

CLOSE_ISSUE = document(
    BACKEND,
    f"""
mutation IssueClose($id: ID!, $withProject: Boolean!) {{
  closeIssue(input: {{issueId: $id, stateReason: COMPLETED}}) {{
    issue {{ ...LegionIssue }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

REOPEN_ISSUE = document(
    BACKEND,
    f"""
mutation IssueReopen($id: ID!, $withProject: Boolean!) {{
  reopenIssue(input: {{issueId: $id}}) {{
    issue {{ ...LegionIssue }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

# The body: how "blocked by" is written (`Blocked by #N` lines; the schema has no dependency
# API). The whole body is sent, as read just before.
UPDATE_ISSUE_BODY = document(
    BACKEND,
    f"""
mutation IssueUpdateBody($id: ID!, $body: String!, $withProject: Boolean!) {{
  updateIssue(input: {{id: $id, body: $body}}) {{
    issue {{ ...LegionIssue }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

# The title (`legion issue edit --title`).
UPDATE_ISSUE_TITLE = document(
    BACKEND,
    f"""
mutation IssueUpdateTitle($id: ID!, $title: String!, $withProject: Boolean!) {{
  updateIssue(input: {{id: $id, title: $title}}) {{
    issue {{ ...LegionIssue }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

# Only the labels named change: a label a person set meanwhile is never clobbered.
ADD_LABELS = document(
    BACKEND,
    f"""
mutation IssueAddLabels($id: ID!, $labelIds: [ID!]!, $withProject: Boolean!) {{
  addLabelsToLabelable(input: {{labelableId: $id, labelIds: $labelIds}}) {{
    labelable {{ ... on Issue {{ ...LegionIssue }} }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

REMOVE_LABELS = document(
    BACKEND,
    f"""
mutation IssueRemoveLabels($id: ID!, $labelIds: [ID!]!, $withProject: Boolean!) {{
  removeLabelsFromLabelable(input: {{labelableId: $id, labelIds: $labelIds}}) {{
    labelable {{ ... on Issue {{ ...LegionIssue }} }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

CREATE_LABEL = document(
    BACKEND,
    """
mutation IssueCreateLabel(
  $repositoryId: ID!, $name: String!, $color: String!, $description: String
) {
  createLabel(
    input: {repositoryId: $repositoryId, name: $name, color: $color, description: $description}
  ) {
    label { id name }
  }
}
""",
)

ADD_COMMENT = document(
    BACKEND,
    f"""
mutation IssueAddComment($id: ID!, $body: String!) {{
  addComment(input: {{subjectId: $id, body: $body}}) {{
    commentEdge {{ node {{ ...LegionIssueComment }} }}
  }}
}}
{_COMMENT_FIELDS}
""",
)

# A comment by its id, with the issue it is on: read before Legion edits it.
COMMENT_NODE = document(
    BACKEND,
    f"""
query IssueCommentNode($id: ID!) {{
  node(id: $id) {{ ... on IssueComment {{ ...LegionIssueComment issue {{ number }} }} }}
}}
{_COMMENT_FIELDS}
""",
)

# Legion's own comment edited in place (a worker's task list), with the issue it is on.
UPDATE_COMMENT = document(
    BACKEND,
    f"""
mutation IssueCommentUpdate($id: ID!, $body: String!) {{
  updateIssueComment(input: {{id: $id, body: $body}}) {{
    issueComment {{ ...LegionIssueComment issue {{ number }} }}
  }}
}}
{_COMMENT_FIELDS}
""",
)

# How Legion edits its own comment: read, checked, then updated (`graphql.edit_legions_comment`).
COMMENT_EDIT = CommentEdit(
    BACKEND,
    COMMENT_NODE,
    "node",
    UPDATE_COMMENT,
    ("updateIssueComment", "issueComment"),
    "number",
    lambda comment_id, body: {"id": comment_id, "body": body},
)

# The project's item for an issue, created when the issue is not in the project yet (adding
# an issue that is there already answers with its existing item).
ADD_PROJECT_ITEM = document(
    BACKEND,
    """
mutation ProjectAddItem($projectId: ID!, $contentId: ID!) {
  addProjectV2ItemById(input: {projectId: $projectId, contentId: $contentId}) {
    item { id }
  }
}
""",
)

SET_PROJECT_STATUS = document(
    BACKEND,
    f"""
mutation ProjectSetStatus(
  $projectId: ID!, $itemId: ID!, $fieldId: ID!, $optionId: String!, $withProject: Boolean!
) {{
  updateProjectV2ItemFieldValue(
    input: {{
      projectId: $projectId, itemId: $itemId, fieldId: $fieldId,
      value: {{singleSelectOptionId: $optionId}}
    }}
  ) {{
    projectV2Item {{ content {{ ... on Issue {{ ...LegionIssue }} }} }}
  }}
}}
{_ISSUE_FIELDS}
""",
)

# No status in the project: what Triage is when the Status field has no option for it.
CLEAR_PROJECT_STATUS = document(
    BACKEND,
    f"""
mutation ProjectClearStatus(
  $projectId: ID!, $itemId: ID!, $fieldId: ID!, $withProject: Boolean!
) {{
  clearProjectV2ItemFieldValue(
    input: {{projectId: $projectId, itemId: $itemId, fieldId: $fieldId}}
  ) {{
    projectV2Item {{ content {{ ... on Issue {{ ...LegionIssue }} }} }}
  }}
}}
{_ISSUE_FIELDS}
""",
)
