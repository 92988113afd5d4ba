"""Every GraphQL document Legion sends to GitHub, each one named operation.

The fixed documents are registered with `legion.graphql_client.document`; the batch query is
generated for the number of branches and PR numbers it asks about (`pr_batch_document`), and
the contract test validates a batch of 1 and of `BATCH_SIZE` against GitHub's published schema
(`tests/contract/schemas/github.schema.json`).

Sizes: GitHub refuses a query that could return more than 500,000 nodes and charges a point
per 100 connection pages it may have to read. A full batch asks for 50 branches x 5 PRs x (20
labels + 20 reviews + 20 comments + 1 commit with 50 checks): 250 + 250 x (20 + 20 + 20 + 1 +
50) = 28,000 nodes, and 50 + 250 x 5 = 1,300 connection pages, 13 points; a PR number asks for
one PR, so a batch that mixes them is smaller. The checks (check runs and commit statuses of
the head commit) come in the same request as the rest of the PR.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from legion.graphql_client import Document, document

BACKEND = "github"
BATCH_SIZE = 50  # branches and PR numbers per batch request, each an alias of its own
PRS_PER_BRANCH = 5  # an issue's newest PRs: enough to find its open one
NESTED_PAGE_SIZE = 20  # a PR's labels, latest reviews and latest comments read with it
CHECKS_PAGE_SIZE = 50  # the head commit's checks read with it (a CI matrix can have dozens)
PAGE_SIZE = 50  # PRs per page when listing

# What Legion reads of a pull request, everywhere it reads one.
_PR_FIELDS = f"""
fragment LegionPullRequest on PullRequest {{
  id
  number
  title
  body
  url
  state
  isDraft
  headRefName
  baseRefName
  headRefOid
  isCrossRepository
  mergeCommit {{ oid }}
  labels(first: {NESTED_PAGE_SIZE}) {{ nodes {{ name }} }}
  reviewDecision
  latestReviews(first: {NESTED_PAGE_SIZE}) {{
    nodes {{ author {{ login }} state body submittedAt authorAssociation viewerDidAuthor }}
  }}
  comments(last: {NESTED_PAGE_SIZE}) {{
    nodes {{ author {{ login }} body createdAt viewerDidAuthor }}
  }}
  mergeable
  commits(last: 1) {{
    nodes {{
      commit {{
        statusCheckRollup {{
          state
          contexts(first: {CHECKS_PAGE_SIZE}) {{
            totalCount
            nodes {{
              __typename
              ... on CheckRun {{ databaseId name status conclusion detailsUrl }}
              ... on StatusContext {{ context state targetUrl }}
            }}
          }}
        }}
      }}
    }}
  }}
  createdAt
  updatedAt
}}
"""

# The viewer, the repository's id (PRs are created in it), whether the token can push, the
# default branch (the base when none is configured) and the review labels' ids.
REPOSITORY_CONTEXT = document(
    BACKEND,
    """
query RepositoryContext($owner: String!, $name: String!, $approved: String!, $changes: String!) {
  viewer { login }
  repository(owner: $owner, name: $name) {
    id
    nameWithOwner
    viewerPermission
    defaultBranchRef { name }
    approvedLabel: label(name: $approved) { id }
    changesLabel: label(name: $changes) { id }
  }
}
""",
)

PULL_REQUEST_BY_NUMBER = document(
    BACKEND,
    """
query PullRequestByNumber($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) { ...LegionPullRequest }
  }
}
"""
    + _PR_FIELDS,
)

PULL_REQUEST_PAGE = document(
    BACKEND,
    """
query PullRequestPage(
  $owner: String!, $name: String!, $states: [PullRequestState!], $first: Int!, $after: String
) {
  repository(owner: $owner, name: $name) {
    pullRequests(
      states: $states, first: $first, after: $after,
      orderBy: {field: UPDATED_AT, direction: DESC}
    ) {
      pageInfo { hasNextPage endCursor }
      nodes { ...LegionPullRequest }
    }
  }
}
"""
    + _PR_FIELDS,
)

CREATE_PULL_REQUEST = document(
    BACKEND,
    """
mutation CreatePullRequest($input: CreatePullRequestInput!) {
  createPullRequest(input: $input) { pullRequest { ...LegionPullRequest } }
}
"""
    + _PR_FIELDS,
)

MARK_READY = document(
    BACKEND,
    """
mutation MarkPullRequestReady($id: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $id}) {
    pullRequest { ...LegionPullRequest }
  }
}
"""
    + _PR_FIELDS,
)

CONVERT_TO_DRAFT = document(
    BACKEND,
    """
mutation ConvertPullRequestToDraft($id: ID!) {
  convertPullRequestToDraft(input: {pullRequestId: $id}) {
    pullRequest { ...LegionPullRequest }
  }
}
"""
    + _PR_FIELDS,
)

ADD_LABELS = document(
    BACKEND,
    """
mutation AddLabels($id: ID!, $labelIds: [ID!]!) {
  addLabelsToLabelable(input: {labelableId: $id, labelIds: $labelIds}) { clientMutationId }
}
""",
)

REMOVE_LABELS = document(
    BACKEND,
    """
mutation RemoveLabels($id: ID!, $labelIds: [ID!]!) {
  removeLabelsFromLabelable(input: {labelableId: $id, labelIds: $labelIds}) { clientMutationId }
}
""",
)

CREATE_LABEL = document(
    BACKEND,
    """
mutation CreateLabel($repositoryId: ID!, $name: String!, $color: String!, $description: String) {
  createLabel(
    input: {repositoryId: $repositoryId, name: $name, color: $color, description: $description}
  ) {
    label { id name }
  }
}
""",
)

# The comment goes last in a review, so its answer carries the PR with every change in it.
ADD_COMMENT = document(
    BACKEND,
    """
mutation AddPullRequestComment($id: ID!, $body: String!) {
  addComment(input: {subjectId: $id, body: $body}) {
    subject { ... on PullRequest { ...LegionPullRequest } }
  }
}
"""
    + _PR_FIELDS,
)

MERGE_PULL_REQUEST = document(
    BACKEND,
    """
mutation MergePullRequest(
  $id: ID!, $method: PullRequestMergeMethod!, $expectedHeadOid: GitObjectID
) {
  mergePullRequest(
    input: {pullRequestId: $id, mergeMethod: $method, expectedHeadOid: $expectedHeadOid}
  ) {
    pullRequest { ...LegionPullRequest }
  }
}
"""
    + _PR_FIELDS,
)

BATCH_OPERATION = "PullRequestsForBranches"


@cache
def pr_batch_document(branches: int, numbers: int = 0) -> Document:
    """One query for the newest PRs of `branches` branches and the PRs of `numbers` numbers:
    alias `i<k>` answers for branch variable `$h<k>`, alias `p<k>` for number variable `$n<k>`.
    Branch names and numbers travel as variables, never as text of the query."""
    if branches < 0 or numbers < 0 or not 1 <= branches + numbers <= BATCH_SIZE:
        raise ValueError(
            f"a batch asks about 1 to {BATCH_SIZE} branches and PR numbers, "
            f"not {branches} and {numbers}"
        )
    variables = [
        *(f"$h{k}: String!" for k in range(branches)),
        *(f"$n{k}: Int!" for k in range(numbers)),
    ]
    order = "orderBy: {field: CREATED_AT, direction: DESC}"
    aliases = [
        *(
            f"    i{k}: pullRequests(headRefName: $h{k}, first: {PRS_PER_BRANCH}, {order}) "
            "{ nodes { ...LegionPullRequest } }"
            for k in range(branches)
        ),
        *(
            f"    p{k}: pullRequest(number: $n{k}) {{ ...LegionPullRequest }}"
            for k in range(numbers)
        ),
    ]
    body = "\n".join(aliases)
    text = (
        f"query {BATCH_OPERATION}($owner: String!, $name: String!, {', '.join(variables)}) {{\n"
        f"  repository(owner: $owner, name: $name) {{\n{body}\n  }}\n}}\n{_PR_FIELDS}"
    )
    return Document(BACKEND, BATCH_OPERATION, text)


# Documents built at run time, by operation name: the contract test validates their sizes.
GENERATED: dict[str, Callable[[int], Document]] = {BATCH_OPERATION: pr_batch_document}
